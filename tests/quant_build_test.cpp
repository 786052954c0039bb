// Quantization methods in the builder, on the small trained model in
// ../shared/models (qwen35-tiny-en): calibration, gptq and the mixed plan
// under --bits-budget write standard MatMulNBits that stock ORT runs, the
// recipe lands in quantization.json, gptq's predictions on text it was not
// calibrated on are closer to the fp32 model's than round-to-nearest's, and
// bad options or calibration text end with one-line errors and no output.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_errors.h"
#include "measure/compare.h"
#include "test_util.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

fs::path source_dir() { return fs::path(DELTAGEN_SOURCE_DIR); }
fs::path tiny_en() { return source_dir() / ".." / "shared" / "models" / "qwen35-tiny-en"; }
fs::path tokenizer_dir() {
  if (const char* e = std::getenv("DELTAGEN_TOKENIZER_ASSETS")) return fs::path(e) / "qwen3";
  return source_dir() / "third_party" / "tokenizer" / "qwen3";
}

// The trained checkpoint with the Qwen3 tokenizer beside it (links, not copies),
// a calibration text (the sample's start) and a held-out one (its end).
struct Fixture {
  TempDir dir;
  fs::path ckpt, calib, heldout;
  std::string skip;
  Fixture() {
    if (!fs::exists(tiny_en() / "model.safetensors") || !fs::exists(tokenizer_dir() / "tokenizer.json")) {
      skip = "needs ../shared/models/qwen35-tiny-en and the Qwen3 tokenizer (scripts/setup.sh)";
      return;
    }
    ckpt = dir / "ckpt";
    fs::create_directories(ckpt);
    for (const char* f : {"config.json", "model.safetensors"}) fs::create_symlink(fs::absolute(tiny_en() / f), ckpt / f);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::create_symlink(fs::absolute(tokenizer_dir() / f), ckpt / f);
    const std::string sample = test::read_text(tiny_en() / "sample.txt");
    calib = dir / "calib.txt";
    heldout = dir / "heldout.txt";
    std::ofstream(calib) << sample.substr(0, 20000);
    std::ofstream(heldout) << sample.substr(sample.size() - 12000);
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

test::CliResult build(const fs::path& out, std::vector<std::string> extra) {
  std::vector<std::string> args = {"build", "--checkpoint", fixture().ckpt.string(), "--out", out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return test::run_cli(args);
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(test::read_text(p)); }

double mean_kl(const fs::path& a, const fs::path& b) {
  measure::CompareOptions o;
  o.greedy_tokens = 0;
  o.threads = 2;
  auto sa = measure::onnx_source(a, 2, o.context), sb = measure::onnx_source(b, 2, o.context);
  measure::CorpusSpec corpus;
  corpus.text_file = fixture().heldout;
  corpus.limit = 1024;
  std::string what;
  const std::vector<int64_t> ids = corpus.load(sa->vocab(), a, &what);
  return measure::compare_sources(*sa, *sb, ids, o).fidelity.kl_mean;
}

TEST(QuantBuild, GptqIsCloserToFp32ThanRoundToNearest) {
  if (!fixture().skip.empty()) GTEST_SKIP() << fixture().skip;
  TempDir out;
  ASSERT_EQ(build(out / "fp32", {"--precision", "fp32"}).exit_code, 0);
  ASSERT_EQ(build(out / "rtn", {"--precision", "int4"}).exit_code, 0);
  const test::CliResult g = build(out / "gptq", {"--precision", "int4", "--quant-method", "gptq", "--calibration",
                                                 fixture().calib.string(), "--calibration-tokens", "512"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  const nlohmann::json recipe = read_json(out / "gptq" / "quantization.json");
  EXPECT_EQ(recipe["method"], "gptq");
  EXPECT_EQ(recipe["calibration"]["tokens"], 512);
  EXPECT_EQ(read_json(out / "rtn" / "quantization.json")["method"], "rtn");
  EXPECT_FALSE(fs::exists(out / "fp32" / "quantization.json"));
  // The same bytes: only the chosen codes and scales differ.
  EXPECT_EQ(fs::file_size(out / "gptq" / "model.onnx"), fs::file_size(out / "rtn" / "model.onnx"));
  const double rtn = mean_kl(out / "fp32", out / "rtn"), gptq = mean_kl(out / "fp32", out / "gptq");
  std::printf("held-out mean KL vs fp32: rtn %.5f, gptq %.5f\n", rtn, gptq);
  EXPECT_LT(gptq, rtn * 0.8);
}

TEST(QuantBuild, BitsBudgetPlansWithinTheBudget) {
  if (!fixture().skip.empty()) GTEST_SKIP() << fixture().skip;
  TempDir out;
  const test::CliResult r = build(out / "mixed", {"--precision", "int4", "--quant-method", "search", "--calibration",
                                                  fixture().calib.string(), "--calibration-tokens", "64",
                                                  "--bits-budget", "4.5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json plan = read_json(out / "mixed" / "quantization.json");
  EXPECT_EQ(plan["bits_budget"], 4.5);
  EXPECT_LE(plan["mixed"]["bits_per_weight"].get<double>(), 4.5);
  const nlohmann::json& sites = plan["mixed"]["sites"];
  ASSERT_EQ(sites.size(), size_t(8 * 4 + 1));  // per layer: mixer in, mixer out, gate/up, down; the head
  std::set<std::string> formats;
  for (const auto& s : sites) {
    formats.insert(s["format"].get<std::string>());
    EXPECT_GT(s["candidates"][0]["kl"].get<double>(), 0.0) << s["weights"][0];
  }
  EXPECT_GT(formats.size(), 1u) << "a budget between the formats mixes them";
  // It runs: the greedy continuation of a prompt.
  const test::CliResult g = test::run_cli({"generate", "--model", (out / "mixed").string(), "--prompt", "The",
                                           "--max-new-tokens", "4", "--ignore-eos"});
  EXPECT_EQ(g.exit_code, 0) << g.err;
}

// With the embedding split off in fp16, the table is three quarters of the
// file's bytes but one row of what a token reads: 4.5 bits per weight read
// fits, per weight stored it cannot.
TEST(QuantBuild, BitsBudgetCountsTheWeightsATokenReads) {
  if (!fixture().skip.empty()) GTEST_SKIP() << fixture().skip;
  TempDir out;
  const std::vector<std::string> flags = {"--precision", "int4", "--quant-method", "search", "--calibration",
                                          fixture().calib.string(), "--calibration-tokens", "64", "--embedding", "fp16",
                                          "--bits-budget", "4.5"};
  const test::CliResult r = build(out / "read", flags);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json q = read_json(out / "read" / "quantization.json");
  EXPECT_EQ(q["mixed"]["budget_of"], "read");
  EXPECT_LE(q["mixed"]["bits_per_weight"].get<double>(), 4.5);
  EXPECT_GT(q["mixed"]["bits_per_weight"].get<double>(), 4.2) << "the plan spends what it is given";
  // The head is its own site and the plan's base is the build's int4.
  EXPECT_EQ(q["mixed"]["base"], "int4/b32/sym");
  // Every promoted site is in the plan with the format named, above the base.
  std::set<std::string> promoted;
  for (const auto& p : q["mixed"]["promoted"]) {
    EXPECT_EQ(p["format"].get<std::string>().rfind("int8", 0), 0u) << p;
    promoted.insert(p["weights"][0].get<std::string>());
  }
  for (const auto& s : q["mixed"]["sites"])
    EXPECT_EQ(promoted.count(s["weights"][0].get<std::string>()) != 0, s["format"].get<std::string>().rfind("int8", 0) == 0)
        << s["weights"][0];
  // The whole model's count, from the graph: the fp16 table is a row of what a token reads.
  const nlohmann::json& w = q["weights"];
  EXPECT_GT(w["file"]["bits_per_weight"].get<double>(), 9.0);
  EXPECT_LT(w["read_per_token"]["bits_per_weight"].get<double>(), 5.0);

  std::vector<std::string> file_flags = flags;
  file_flags.insert(file_flags.end(), {"--budget-of", "file"});
  test::expect_one_line_error(build(out / "file", file_flags), "no plan fits 4.5");
  EXPECT_FALSE(fs::exists(out / "file"));
}

TEST(QuantBuild, BadOptionsAndCalibrationTextAreOneLineErrors) {
  if (!fixture().skip.empty()) GTEST_SKIP() << fixture().skip;
  TempDir out;
  const std::string calib = fixture().calib.string();
  test::expect_one_line_error(build(out / "m", {"--precision", "int4", "--quant-method", "gptq"}), "--calibration");
  test::expect_one_line_error(build(out / "m", {"--precision", "int4", "--quant-method", "awq"}), "awq");
  test::expect_one_line_error(build(out / "m", {"--precision", "int4", "--quant-method", "kquant"}), "kquant");
  test::expect_one_line_error(build(out / "m", {"--precision", "fp16", "--quant-method", "search"}), "quantized");
  test::expect_one_line_error(
      build(out / "m", {"--precision", "int8", "--calibration", calib, "--bits-budget", "4.5"}), "--bits-budget");
  test::expect_one_line_error(build(out / "m", {"--precision", "int4", "--calibration", calib, "--bits-budget", "x"}),
                              "--bits-budget");
  test::expect_one_line_error(
      build(out / "m", {"--precision", "int4", "--calibration", calib, "--bits-budget", "2.1"}), "no plan fits");
  // Predicted memory above what is allowed: refused before calibrating, with the estimate.
  test::expect_one_line_error(build(out / "m", {"--precision", "int4", "--quant-method", "gptq", "--calibration",
                                                calib, "--memory-limit", "0.001"}),
                              "needs about");
  test::expect_one_line_error(build(out / "m", {"--precision", "int4", "--quant-method", "gptq", "--calibration",
                                                calib, "--memory-limit", "lots"}),
                              "--memory-limit");
  // More calibration tokens than the text holds.
  test::expect_one_line_error(build(out / "m", {"--precision", "int4", "--quant-method", "gptq", "--calibration",
                                                calib, "--calibration-tokens", "100000"}),
                              "calib.txt");
  const fs::path empty = out / "empty.txt", binary = out / "binary.txt", short_text = out / "short.txt";
  std::ofstream(empty).flush();
  const char bytes[] = {'\xff', '\xfe', '\x00', '\x01', 'n', 'o', 't', ' ', 't', 'e', 'x', 't'};
  std::ofstream(binary, std::ios::binary).write(bytes, sizeof bytes);
  std::ofstream(short_text) << "Too short.";
  for (const fs::path& bad : {empty, binary, short_text, out / "missing.txt"}) {
    const test::CliResult r = build(out / "m", {"--precision", "int4", "--quant-method", "gptq", "--calibration", bad.string()});
    test::expect_one_line_error(r, bad.filename().string());
  }
  EXPECT_FALSE(fs::exists(out / "m"));
}

}  // namespace
}  // namespace deltagen
