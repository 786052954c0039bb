// deltagen compare on tiny models: a model against itself is exactly
// identical (KL 0), a perturbed model is not, the float64 reference mode
// agrees with the fp32 golden build to fp32 precision, the metrics match
// hand-computed values, and the depth study builds and compares both variants
// at every depth.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "tools/build_flags.h"
#include "measure/compare.h"
#include "measure/corpus.h"
#include "models/build.h"
#include "synth/synth.h"
#include "test_util.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using measure::CompareOptions;
using test::golden_checkpoint;
using test::run_cli;
using test::TempDir;

// Built once per process: the golden checkpoint as is, and with the exact
// L2-norm epsilon (a graph switch that changes the logits a little).
struct Models {
  TempDir dir;
  fs::path plain, exact_eps, other_seed;
  Models() {
    auto ckpt = Checkpoint::open(golden_checkpoint());
    BuildOptions b;
    b.show_progress = false;
    plain = dir / "plain";
    build_model(*ckpt, b, plain);
    b.l2norm = "lpnorm-eps";
    exact_eps = dir / "exact-eps";
    build_model(*ckpt, b, exact_eps);
    // The same shapes with other random weights: a very different model.
    SynthOptions so;
    so.seed = 7;
    write_synthetic_checkpoint(synth_preset("tiny"), so, dir / "seed7-ckpt");
    other_seed = dir / "seed7";
    build_model(*Checkpoint::open(dir / "seed7-ckpt"), BuildOptions{.show_progress = false}, other_seed);
  }
};
const Models& models() {
  static Models m;
  return m;
}

CompareOptions small_options() {
  CompareOptions o;
  o.context = 64;
  o.chunk = 24;  // not a divisor of the window: the chunking must not matter
  o.greedy_prompt = 8;
  o.greedy_tokens = 32;
  o.threads = 1;
  return o;
}

// ---- metrics ---------------------------------------------------------------------------

TEST(Fidelity, MatchesHandComputedValues) {
  measure::FidelityAccumulator acc;
  // p_A = (1/2, 1/2), p_B = (3/4, 1/4): KL(A||B) = 1/2 ln(4/3); next token 1.
  const double a[2] = {0, 0}, b[2] = {std::log(3.0), 0};
  acc.add(a, b, 2, 1);
  measure::Fidelity f = acc.result();
  EXPECT_EQ(f.positions, 1);
  EXPECT_NEAR(f.kl_mean, 0.5 * std::log(4.0 / 3.0), 1e-15);
  EXPECT_EQ(f.kl_max, f.kl_mean);
  EXPECT_EQ(f.top1_same, 1);  // argmax of (0, 0) is 0 (lowest on ties), of (ln 3, 0) is 0
  EXPECT_NEAR(f.max_abs_logit_diff, std::log(3.0), 1e-15);
  EXPECT_NEAR(f.mean_abs_logit_diff, std::log(3.0) / 2, 1e-15);
  EXPECT_NEAR(f.ppl_a, 2.0, 1e-12);   // -ln(1/2)
  EXPECT_NEAR(f.ppl_b, 4.0, 1e-12);   // -ln(1/4)
  EXPECT_NEAR(f.ppl_ratio, 2.0, 1e-12);
  EXPECT_NEAR(f.rms_dp, 0.25, 1e-12);
  EXPECT_EQ(measure::FidelityAccumulator().result().positions, 0);
}

TEST(Corpus, IdsFilesAndPseudoRandomIds) {
  TempDir dir;
  std::ofstream(dir / "ids.txt") << "5, 17,300\n 42\t7,\n";
  EXPECT_EQ(measure::read_ids_file(dir / "ids.txt"), (std::vector<int64_t>{5, 17, 300, 42, 7}));
  std::ofstream(dir / "bad.txt") << "5 x 7";
  EXPECT_THROW(measure::read_ids_file(dir / "bad.txt"), Error);
  std::ofstream(dir / "empty.txt") << " \n";
  EXPECT_THROW(measure::read_ids_file(dir / "empty.txt"), Error);

  auto ids = measure::pseudo_random_ids(1000, 512, 3);
  EXPECT_EQ(ids, measure::pseudo_random_ids(1000, 512, 3));
  EXPECT_NE(ids, measure::pseudo_random_ids(1000, 512, 4));
  for (int64_t id : ids) ASSERT_TRUE(id >= 0 && id < 512);

  measure::CorpusSpec spec;
  spec.ids_file = dir / "ids.txt";
  EXPECT_THROW(spec.load(100, {}, nullptr), Error);  // 300 is outside a 100-token vocabulary
  spec.limit = 2;
  std::string what;
  EXPECT_EQ(spec.load(100, {}, &what), (std::vector<int64_t>{5, 17}));
  EXPECT_NE(what.find("ids.txt"), std::string::npos);
}

TEST(BuildFlags, ParsesTheBuildCommandsFlags) {
  BuildOptions o = parse_build_flags("");
  EXPECT_EQ(o.precision, BuildOptions{}.precision);
  EXPECT_EQ(o.l2norm, BuildOptions{}.l2norm);
  EXPECT_FALSE(o.norm_upcast);
  o = parse_build_flags("  --l2norm decomposed --context-length 128 --precision fp16 --norm-upcast ");
  EXPECT_EQ(o.l2norm, "decomposed");
  EXPECT_TRUE(o.norm_upcast);
  EXPECT_EQ(o.precision, "fp16");
  EXPECT_EQ(o.context_length, 128);
  EXPECT_EQ(parse_build_flags("--exact-l2norm-eps").l2norm, "lpnorm-eps");  // normalized
  EXPECT_THROW(parse_build_flags("--l2norm nonsense"), Error);
  EXPECT_THROW(parse_build_flags("--bogus"), Error);
  EXPECT_THROW(parse_build_flags("--precision"), Error);
  EXPECT_THROW(parse_build_flags("--out somewhere"), Error);
}

// ---- comparisons ------------------------------------------------------------------------

TEST(Compare, ModelAgainstItselfIsExactlyIdentical) {
  auto a = measure::onnx_source(models().plain, 1, 64);
  auto b = measure::onnx_source(models().plain, 1, 64);
  const auto corpus = measure::pseudo_random_ids(150, a->vocab(), 1);
  measure::CompareReport r = measure::compare_sources(*a, *b, corpus, small_options());
  const measure::Fidelity& f = r.fidelity;
  EXPECT_EQ(r.windows, 3);                // 64 + 64 + 22
  EXPECT_EQ(f.positions, 63 + 63 + 21);  // the last token of each window predicts nothing
  EXPECT_EQ(f.kl_mean, 0.0);
  EXPECT_EQ(f.kl_max, 0.0);
  EXPECT_EQ(f.max_abs_logit_diff, 0.0);
  EXPECT_EQ(f.top1_agreement, 1.0);
  EXPECT_EQ(f.ppl_ratio, 1.0);
  EXPECT_GT(f.ppl_a, 1.0);
  EXPECT_EQ(r.greedy_tokens, 32);
  EXPECT_EQ(r.greedy_agree, 32);
}

TEST(Compare, PerturbedModelsDiffer) {
  auto a = measure::onnx_source(models().plain, 1, 64);
  auto eps = measure::onnx_source(models().exact_eps, 1, 64);
  const auto corpus = measure::pseudo_random_ids(128, a->vocab(), 2);
  measure::Fidelity small = measure::compare_sources(*a, *eps, corpus, small_options()).fidelity;
  EXPECT_GT(small.kl_mean, 0);
  EXPECT_GT(small.max_abs_logit_diff, 0);
  EXPECT_LE(small.kl_median, small.kl_p99);
  EXPECT_LE(small.kl_p99, small.kl_p999);
  EXPECT_LE(small.kl_p999, small.kl_max);
  EXPECT_LE(small.mean_abs_logit_diff, small.max_abs_logit_diff);

  auto other = measure::onnx_source(models().other_seed, 1, 64);
  measure::Fidelity big = measure::compare_sources(*a, *other, corpus, small_options()).fidelity;
  EXPECT_GT(big.kl_mean, small.kl_mean);  // other weights are much further away than a graph switch
  EXPECT_LT(big.top1_agreement, 1.0);
}

TEST(Compare, ReferenceModeAgreesToFp32Precision) {
  auto ref = measure::reference_source(golden_checkpoint());
  auto b = measure::onnx_source(models().plain, 1, 64);
  const auto corpus = measure::pseudo_random_ids(64, b->vocab(), 3);
  measure::CompareReport r = measure::compare_sources(*ref, *b, corpus, small_options());
  EXPECT_EQ(r.a_name.rfind("reference:", 0), 0u) << r.a_name;
  EXPECT_EQ(r.fidelity.positions, 63);
  EXPECT_GT(r.fidelity.max_abs_logit_diff, 0);       // fp32 is not fp64 ...
  EXPECT_LT(r.fidelity.max_abs_logit_diff, 1e-3);    // ... but close (the golden tests demand 1e-4)
  EXPECT_LT(r.fidelity.kl_max, 1e-6);
  EXPECT_NEAR(r.fidelity.ppl_ratio, 1.0, 1e-5);
  EXPECT_EQ(r.greedy_tokens, 32);
}

// The sanity check: an fp16 build differs from the fp32 build of the
// same weights (KL > 0), but only by rounding (same top-1 almost everywhere).
TEST(Compare, Fp16BuildAgainstFp32HasSmallPositiveKl) {
  TempDir dir;
  BuildOptions b;
  b.show_progress = false;
  b.precision = "fp16";
  build_model(*Checkpoint::open(golden_checkpoint()), b, dir / "fp16");
  auto fp32 = measure::onnx_source(models().plain, 1, 64);
  auto fp16 = measure::onnx_source(dir / "fp16", 1, 64);
  const auto corpus = measure::pseudo_random_ids(128, fp32->vocab(), 3);
  const measure::Fidelity f = measure::compare_sources(*fp32, *fp16, corpus, small_options()).fidelity;
  EXPECT_GT(f.kl_mean, 0);
  EXPECT_LT(f.kl_mean, 1e-4);  // measured 5.3e-6
  EXPECT_GT(f.top1_agreement, 0.9);  // measured 99.2 %
}

TEST(Compare, RejectsMismatchedVocabularies) {
  TempDir dir;
  ModelConfig cfg = synth_preset("tiny");
  cfg.vocab_size = 256;
  cfg.eos_token_ids = {255};
  write_synthetic_checkpoint(cfg, SynthOptions{}, dir / "ckpt");
  build_model(*Checkpoint::open(dir / "ckpt"), BuildOptions{.context_length = 128, .show_progress = false}, dir / "m");
  auto a = measure::onnx_source(models().plain, 1, 64);
  auto b = measure::onnx_source(dir / "m", 1, 64);
  const auto corpus = measure::pseudo_random_ids(16, 256, 0);
  EXPECT_THROW(measure::compare_sources(*a, *b, corpus, small_options()), Error);
}

// ---- the CLI --------------------------------------------------------------------------------

TEST(CompareCli, PairJsonAndMarkdown) {
  const std::string a = models().plain.string(), b = models().exact_eps.string();
  auto r = run_cli({"compare", "--a", a, "--b", b, "--context", "48", "--tokens", "96", "--greedy-tokens", "16",
                    "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["comparisons"].size(), 1u);
  const auto& c = j["comparisons"][0];
  EXPECT_EQ(c["corpus_tokens"], 96);
  EXPECT_EQ(c["windows"], 2);
  for (const char* key : {"kl_mean", "kl_p99", "kl_p999", "kl_max", "top1_agreement", "max_abs_logit_diff",
                          "mean_abs_logit_diff", "ppl_a", "ppl_b", "ppl_ratio", "logits_nmse", "rms_dp"})
    EXPECT_TRUE(c["fidelity"].contains(key)) << key;
  EXPECT_GT(c["fidelity"]["kl_mean"].get<double>(), 0);
  EXPECT_EQ(c["greedy"]["tokens"], 16);

  r = run_cli({"compare", "--a", a, "--b", a, "--tokens", "40", "--greedy-tokens", "8", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| mean KL(A‖B) | 0 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| greedy agreement"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 8/8 |"), std::string::npos) << r.out;
}

// --a-kernels / --b-kernels: an int4 build on ORT's MatMulNBits against the same
// file on deltagen's kernels differs a little (both are accuracy level 4, with
// different int8 rounding); the same kernels on both sides do not differ at all.
TEST(CompareCli, KernelChoicePerSide) {
  TempDir dir;
  BuildOptions b;
  b.show_progress = false;
  b.precision = "int4";
  build_model(*Checkpoint::open(golden_checkpoint()), b, dir / "int4");
  const std::string m = (dir / "int4").string();
  const std::vector<std::string> common = {"--tokens", "64", "--context", "32", "--greedy-tokens", "8", "--threads",
                                           "1", "--json"};
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.end(), common.begin(), common.end());
    auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["comparisons"][0]["fidelity"];
  };
  const auto mixed = run({"compare", "--a", m, "--a-kernels", "ort", "--b", m});
  EXPECT_GT(mixed["kl_mean"].get<double>(), 0);
  EXPECT_LT(mixed["kl_mean"].get<double>(), 1e-2);
  EXPECT_EQ(run({"compare", "--a", m, "--a-kernels", "ort", "--b", m, "--b-kernels", "ort"})["kl_mean"], 0);
  auto bad = run_cli({"compare", "--a", m, "--b", m, "--b-kernels", "fast"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--b-kernels"), std::string::npos) << bad.err;
}

TEST(CompareCli, ReferenceModeWithAndWithoutA) {
  TempDir dir;
  std::ofstream(dir / "ids.txt") << "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 100 200 300 400";
  const std::string ids = (dir / "ids.txt").string();
  auto r = run_cli({"compare", "--reference", golden_checkpoint().string(), "--b", models().plain.string(),
                    "--ids-file", ids, "--greedy-tokens", "8", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["comparisons"].size(), 1u);
  EXPECT_TRUE(j["comparisons"][0]["a_is_reference"].get<bool>());
  EXPECT_EQ(j["comparisons"][0]["fidelity"]["positions"], 19);
  EXPECT_LT(j["comparisons"][0]["fidelity"]["kl_max"].get<double>(), 1e-6);

  r = run_cli({"compare", "--reference", golden_checkpoint().string(), "--a", models().plain.string(), "--b",
               models().exact_eps.string(), "--ids-file", ids, "--greedy-tokens", "0", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["comparisons"].size(), 2u);  // A against the reference, then B
  EXPECT_EQ(j["comparisons"][0]["b"], "plain");
  EXPECT_EQ(j["comparisons"][1]["b"], "exact-eps");
  EXPECT_EQ(j["comparisons"][1]["greedy"]["tokens"], 0);
}

TEST(CompareCli, DepthStudy) {
  auto r = run_cli({"compare", "--depth", "4,8", "--preset", "tiny", "--build-a", "", "--build-b",
                    "--l2norm lpnorm-eps", "--tokens", "64", "--context", "32", "--greedy-tokens", "8", "--threads",
                    "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["depths"].size(), 2u);
  EXPECT_EQ(j["depths"][0]["layers"], 4);
  EXPECT_EQ(j["depths"][1]["layers"], 8);
  for (const auto& d : j["depths"]) {
    EXPECT_GT(d["nodes_b"].get<int64_t>(), d["nodes_a"].get<int64_t>());  // Pad + Slice around each L2 norm
    EXPECT_GT(d["fidelity"]["kl_mean"].get<double>(), 0);
    EXPECT_EQ(d["fidelity"]["positions"], 62);
  }
  // Identical flags: one build per depth, compared with itself.
  r = run_cli({"compare", "--depth", "4", "--preset", "tiny", "--build-a", "", "--build-b", "", "--tokens", "32",
               "--greedy-tokens", "4", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| 4 |"), std::string::npos) << r.out;
}

// A minimal byte-level BPE tokenizer.json: the 256 byte tokens of GPT-2's
// byte-to-unicode table, no merges (ids 0..255, inside the tiny vocabulary).
std::string byte_level_tokenizer_json() {
  auto utf8 = [](uint32_t cp) {
    std::string s;
    if (cp < 0x80) s += char(cp);
    else s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));  // all code points here are < 0x800
    return s;
  };
  nlohmann::json vocab = nlohmann::json::object();
  uint32_t extra = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    vocab[utf8(printable ? b : 256 + extra++)] = b;
  }
  nlohmann::json j = {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return j.dump();
}

TEST(CompareCli, TextCorpusUsesTheModelsTokenizer) {
  TempDir dir;
  // A copy of the built model with a tokenizer beside it.
  fs::copy(models().plain, dir / "model", fs::copy_options::recursive);
  std::ofstream(dir / "model" / "tokenizer.json") << byte_level_tokenizer_json();
  std::ofstream(dir / "corpus.txt") << "The quick brown fox jumps over the lazy dog. Ünïcödé too.";
  auto r = run_cli({"compare", "--a", (dir / "model").string(), "--b", models().exact_eps.string(), "--corpus",
                    (dir / "corpus.txt").string(), "--greedy-tokens", "4", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  // One id per byte: 57 ASCII characters + 4 two-byte ones.
  EXPECT_EQ(j["comparisons"][0]["corpus_tokens"], 61);
  EXPECT_EQ(j["comparisons"][0]["corpus"], "corpus.txt (text)");
}

TEST(CompareCli, BadInput) {
  const std::string a = models().plain.string();
  auto r = run_cli({"compare", "--a", a});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--b"), std::string::npos) << r.err;
  r = run_cli({"compare", "--b", a});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--reference"), std::string::npos) << r.err;
  r = run_cli({"compare", "--a", a, "--b", a, "--context", "1"});
  EXPECT_EQ(r.exit_code, 1);
  r = run_cli({"compare", "--a", a, "--b", a, "--corpus", "/nonexistent.txt"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokenizer.json"), std::string::npos) << r.err;  // the built golden model has none
  r = run_cli({"compare", "--depth", "4", "--preset", "tiny", "--build-b", "--bogus"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;
  r = run_cli({"compare", "--depth", "4", "--preset", "huge"});
  EXPECT_EQ(r.exit_code, 1);
  r = run_cli({"compare", "--depth", "4", "--a", a});
  EXPECT_EQ(r.exit_code, 1);
}

}  // namespace
}  // namespace deltagen
