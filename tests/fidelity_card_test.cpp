// The fidelity card (measure/fidelity_card.h, `deltagen card`, `build
// --card`): a model against itself has exactly zero KL, the fp32 build
// against its checkpoint's float64 reference has next to none; the card
// records the text (name, size, SHA-256), the reference by folder name, the
// settings, and the model folder's quantization.json verbatim; bad text
// (missing, empty, not UTF-8, too short) is a one-line error naming the file
// with no card left behind, also from `build --card` (before anything is
// built); inspect and /v1/models show the card.
//
// The model: the golden checkpoint (tiny-a) built as fp32, with the tiny
// byte-level tokenizer of the runtime tests (tests/runtime_fixtures.h).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli_errors.h"
#include "measure/corpus.h"
#include "tokenizer/text_file.h"
#include "measure/fidelity_card.h"
#include "runtime_fixtures.h"
#include "serve/scheduler.h"
#include "serve/service.h"
#include "synth/synth.h"
#include "test_util.h"
#include "util/sha256.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using test::error_message;
using test::golden_checkpoint;
using test::run_cli;
using test::TempDir;

constexpr const char* kText =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity. Ünïcödé and ascii alike.";

// A copy of the golden fp32 model with the tiny tokenizer beside it (each
// test its own: cards are written into it).
fs::path model_with_tokenizer(const TempDir& dir, const std::string& name = "tiny-fp32") {
  const fs::path out = dir / name;
  test::copy_model_with_tokenizer(test::golden_model_dir(), out, test::tiny_tokenizer_json(),
                                  test::tiny_tokenizer_config_json());
  return out;
}

fs::path write_text(const TempDir& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir / name, std::ios::binary) << bytes;
  return dir / name;
}

measure::CardOptions small_options(const fs::path& text, const fs::path& reference) {
  measure::CardOptions o;
  o.text_file = text;
  o.reference = reference;
  o.max_tokens = 120;
  o.context = 48;
  o.threads = 1;
  return o;
}

double num(const ordered_json& card, const char* a, const char* b = nullptr) {
  return b ? card.at(a).at(b).get<double>() : card.at(a).get<double>();
}

// ---- the text checks (measure/corpus.h) ---------------------------------------------

TEST(CorpusText, ValidatesBeforeMeasuring) {
  TempDir dir;
  std::ofstream(dir / "tokenizer.json") << test::tiny_tokenizer_json();
  const fs::path good = write_text(dir, "good.txt", kText);
  std::string bytes;
  const auto ids = load_text_for_measuring(good, dir.path(), 16, &bytes);
  EXPECT_EQ(bytes, kText);
  EXPECT_GT(ids.size(), 150u);
  EXPECT_EQ(validate_text_file(good), kText);

  auto error = [&](const fs::path& file, int64_t min_tokens = 16) {
    return error_message([&] { load_text_for_measuring(file, dir.path(), min_tokens); });
  };
  EXPECT_EQ(error(dir / "missing.txt"), (dir / "missing.txt").string() + ": no such file");
  EXPECT_EQ(error(write_text(dir, "empty.txt", "")), (dir / "empty.txt").string() + ": the text is empty");
  EXPECT_EQ(error(write_text(dir, "bad.txt", "ok \xff\xfe")), (dir / "bad.txt").string() + ": not valid UTF-8 (byte 3)");
  EXPECT_EQ(error(write_text(dir, "short.txt", "abc")),
            (dir / "short.txt").string() + ": too short: 3 tokens, need at least 16");
  EXPECT_EQ(error(good, 100000).find(good.string() + ": too short: "), 0u);
  EXPECT_NE(error_message([&] { load_text_for_measuring(good, dir / "none"); }).find("tokenizer.json"),
            std::string::npos);
  // validate_text_file needs no tokenizer.
  EXPECT_EQ(error_message([&] { validate_text_file(dir / "bad.txt"); }),
            (dir / "bad.txt").string() + ": not valid UTF-8 (byte 3)");
}

// ---- measuring ---------------------------------------------------------------------

TEST(FidelityCard, ModelAgainstItselfIsExactlyZero) {
  TempDir dir;
  const fs::path model = model_with_tokenizer(dir);
  const fs::path text = write_text(dir, "card.txt", kText);
  const ordered_json card = measure::measure_fidelity_card(model, small_options(text, model));
  EXPECT_EQ(num(card, "kl", "max"), 0.0);
  EXPECT_EQ(num(card, "kl", "mean"), 0.0);
  EXPECT_EQ(num(card, "top1_agreement"), 1.0);
  EXPECT_EQ(num(card, "ppl", "ratio"), 1.0);
  EXPECT_EQ(num(card, "rms_dp"), 0.0);
  EXPECT_GT(num(card, "ppl", "model"), 1.0);
  EXPECT_EQ(card["tokens"], 120);                 // --max-tokens of a longer text
  EXPECT_EQ(card["windows"], 3);                  // 48 + 48 + 24
  EXPECT_EQ(card["positions"], 47 + 47 + 23);
  EXPECT_EQ(card["reference"], (ordered_json{{"kind", "model"}, {"name", "tiny-fp32"}}));
  EXPECT_EQ(card["tokenizer"], "model");
  EXPECT_FALSE(fs::exists(model / "fidelity.json"));  // measure_ writes nothing
}

TEST(FidelityCard, Fp32BuildAgainstItsCheckpointIsTiny) {
  TempDir dir;
  const fs::path model = model_with_tokenizer(dir);
  const fs::path text = write_text(dir, "card.txt", kText);
  const ordered_json card = measure::measure_fidelity_card(model, small_options(text, golden_checkpoint()));
  EXPECT_LT(num(card, "kl", "max"), 1e-6);
  EXPECT_GE(num(card, "kl", "mean"), 0.0);
  EXPECT_LE(num(card, "kl", "median"), num(card, "kl", "p99"));
  EXPECT_LE(num(card, "kl", "p99"), num(card, "kl", "p999"));
  EXPECT_LE(num(card, "kl", "p999"), num(card, "kl", "max"));
  EXPECT_NEAR(num(card, "ppl", "ratio"), 1.0, 1e-5);
  EXPECT_GT(num(card, "top1_agreement"), 0.97);
  EXPECT_EQ(card["reference"]["kind"], "checkpoint");
  EXPECT_EQ(card["reference"]["name"], "tiny-a");
}

TEST(FidelityCard, TheTokenizerFallsBackToTheReferences) {
  TempDir dir;
  const fs::path reference = model_with_tokenizer(dir);
  const fs::path text = write_text(dir, "card.txt", kText);
  // The golden build has no tokenizer.json; the same weights with one are the reference.
  const ordered_json card = measure::measure_fidelity_card(test::golden_model_dir(), small_options(text, reference));
  EXPECT_EQ(card["tokenizer"], "reference");
  EXPECT_EQ(num(card, "kl", "max"), 0.0);
  // Neither has one.
  EXPECT_NE(error_message([&] {
              measure::measure_fidelity_card(test::golden_model_dir(), small_options(text, golden_checkpoint()));
            }).find("no tokenizer.json"),
            std::string::npos);
}

TEST(FidelityCard, RecordsTextSettingsDateAndQuantization) {
  TempDir dir;
  const fs::path model = model_with_tokenizer(dir);
  const fs::path text = write_text(dir, "card.txt", kText);
  const ordered_json card = measure::write_fidelity_card(model, small_options(text, golden_checkpoint()));
  const std::string file = test::read_text(model / "fidelity.json");
  EXPECT_EQ(ordered_json::parse(file), card);
  const auto read = read_fidelity_card(model);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(*read, card);
  const auto via_file = read_fidelity_card(model / "model.onnx");  // the .onnx file names its folder
  ASSERT_TRUE(via_file.has_value());
  EXPECT_EQ(*via_file, card);
  EXPECT_FALSE(read_fidelity_card(dir.path()).has_value());
  EXPECT_EQ(file.find(dir.path().string()), std::string::npos) << "no machine paths in the card";

  EXPECT_EQ(card["card"], "deltagen fidelity card");
  EXPECT_EQ(card["model"], "tiny-fp32");
  EXPECT_EQ(card["text"]["file"], "card.txt");
  EXPECT_EQ(card["text"]["bytes"], std::string(kText).size());
  EXPECT_EQ(card["text"]["sha256"], sha256_hex(kText));
  EXPECT_GT(card["text"]["tokens"].get<int64_t>(), 120);
  EXPECT_EQ(card["settings"], (ordered_json{{"context", 48}, {"max_tokens", 120}}));
  EXPECT_TRUE(std::regex_match(card["date"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << card["date"];
  EXPECT_FALSE(card.contains("quantization"));
  EXPECT_EQ(card_summary_line(card).rfind("fidelity (vs tiny-a float64, 120 tokens of card.txt): mean KL ", 0),
            0u)
      << card_summary_line(card);

  // A quantization plan beside the model is embedded as it is (key order too).
  const std::string plan = R"({"method": "rtn", "bits": 4, "layers": [{"name": "z", "bits": 8}, {"name": "a", "bits": 4}]})";
  std::ofstream(model / "quantization.json") << plan;
  const ordered_json with_plan = measure::write_fidelity_card(model, small_options(text, golden_checkpoint()));
  EXPECT_EQ(with_plan["quantization"].dump(), ordered_json::parse(plan).dump());
  EXPECT_EQ(ordered_json::parse(test::read_text(model / "fidelity.json"))["quantization"], with_plan["quantization"]);

  // A plan that does not parse: an error naming it, and the old card stays.
  std::ofstream(model / "quantization.json") << "{oops";
  EXPECT_EQ(error_message([&] { measure::write_fidelity_card(model, small_options(text, golden_checkpoint())); })
                .find((model / "quantization.json").string() + ": not valid JSON"),
            0u);
  EXPECT_EQ(ordered_json::parse(test::read_text(model / "fidelity.json")), with_plan);
}

TEST(FidelityCard, BadInputIsOneLineErrorAndNoCard) {
  TempDir dir;
  const fs::path model = model_with_tokenizer(dir);
  const fs::path text = write_text(dir, "card.txt", kText);
  auto error = [&](const measure::CardOptions& o) {
    return error_message([&] { measure::write_fidelity_card(model, o); });
  };
  auto expect_error = [&](const measure::CardOptions& o, const std::string& want) {
    const std::string m = error(o);
    EXPECT_EQ(m, want);
    EXPECT_FALSE(fs::exists(model / "fidelity.json")) << m;
  };
  const fs::path ref = golden_checkpoint();
  const fs::path empty = write_text(dir, "empty.txt", ""), bad = write_text(dir, "bad.txt", "\xff\xfe"),
                 short_text = write_text(dir, "short.txt", "abcde");
  expect_error(small_options(dir / "missing.txt", ref), (dir / "missing.txt").string() + ": no such file");
  expect_error(small_options(empty, ref), empty.string() + ": the text is empty");
  expect_error(small_options(bad, ref), bad.string() + ": not valid UTF-8 (byte 0)");
  expect_error(small_options(short_text, ref), short_text.string() + ": too short: 5 tokens, need at least 16");
  fs::create_directories(dir / "not-a-model");
  expect_error(small_options(text, dir / "not-a-model"),
               (dir / "not-a-model").string() +
                   ": neither a checkpoint (config.json and *.safetensors) nor a built model (genai_config.json)");
  expect_error(small_options(text, dir / "nowhere"),
               (dir / "nowhere").string() + ": no such folder (the reference: a checkpoint or a built model)");
  measure::CardOptions o = small_options(text, ref);
  o.max_tokens = 8;
  expect_error(o, "--max-tokens: needs at least 16 tokens");
  o = small_options(text, ref);
  o.context = 1;
  expect_error(o, "--context: needs at least 2 tokens (one scored position)");
  EXPECT_NE(error_message([&] { measure::write_fidelity_card(dir / "not-a-model", small_options(text, ref)); })
                .find("not a built model folder"),
            std::string::npos);

  // A reference with another vocabulary.
  ModelConfig c = synth_preset("tiny");
  c.vocab_size = 1024;
  write_synthetic_checkpoint(c, SynthOptions{}, dir / "vocab1024");
  expect_error(small_options(text, dir / "vocab1024"),
               (dir / "vocab1024").string() + ": vocabulary mismatch: the reference has 1024 token ids, the model 512");
}

// ---- the CLI -------------------------------------------------------------------------

TEST(FidelityCardCli, CardWritesTheCardAndInspectShowsIt) {
  TempDir dir;
  const fs::path model = model_with_tokenizer(dir);
  const fs::path text = write_text(dir, "card.txt", kText);
  auto r = run_cli({"card", model.string(), "--reference", golden_checkpoint().string(), "--text", text.string(),
                    "--max-tokens", "100", "--context", "64", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + (model / "fidelity.json").string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mean KL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ratio"), std::string::npos) << r.out;
  const ordered_json card = ordered_json::parse(test::read_text(model / "fidelity.json"));
  EXPECT_LT(num(card, "kl", "max"), 1e-6);
  EXPECT_EQ(card["tokens"], 100);
  // An fp32 model: 32 bits per weight stored and read (its tied table is the lm_head, read whole).
  EXPECT_EQ(card["weights"]["file"]["bits_per_weight"], 32.0);
  EXPECT_EQ(card["weights"]["read_per_token"]["bytes"], card["weights"]["file"]["bytes"]);

  r = run_cli({"card", model.string(), "--reference", model.string(), "--text", text.string(), "--max-tokens", "100",
               "--context", "64", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ordered_json self = ordered_json::parse(r.out);
  EXPECT_EQ(num(self, "kl", "max"), 0.0);
  EXPECT_EQ(ordered_json::parse(test::read_text(model / "fidelity.json")), self);

  r = run_cli({"inspect", model.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nfidelity (vs tiny-fp32, 100 tokens of card.txt): mean KL 0, p99 0, top-1 100.00 %, ppl ratio 1.0000, "
                       "32.00 bits/weight read per token (32.00 in the file)\n"),
            std::string::npos)
      << r.out;
  r = run_cli({"inspect", model.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["fidelity"], nlohmann::json(self));
  // Without a card, inspect says nothing of one.
  r = run_cli({"inspect", test::golden_model_dir().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("fidelity"), std::string::npos);
}

TEST(FidelityCardCli, BadTextFailsWithOneLineErrorAndNothingWritten) {
  TempDir dir;
  const fs::path model = model_with_tokenizer(dir);
  // A checkpoint with the tokenizer (what build copies into the model).
  fs::copy(golden_checkpoint(), dir / "ckpt", fs::copy_options::recursive);
  std::ofstream(dir / "ckpt" / "tokenizer.json") << test::tiny_tokenizer_json();
  const std::pair<fs::path, std::string> cases[] = {
      {write_text(dir, "empty.txt", ""), "the text is empty"},
      {write_text(dir, "binary.txt", "\xff\xfe"), "not valid UTF-8"},
      {write_text(dir, "short.txt", "a few words"), "too short: 11 tokens, need at least 16"},
      {dir / "missing.txt", "no such file"}};
  for (const auto& [file, problem] : cases) {
    SCOPED_TRACE(file.filename().string());
    auto r = run_cli({"card", model.string(), "--reference", golden_checkpoint().string(), "--text", file.string()});
    test::expect_one_line_error(r, file.string() + ": " + problem);
    EXPECT_FALSE(fs::exists(model / "fidelity.json"));
    r = run_cli({"build", "--checkpoint", (dir / "ckpt").string(), "--out", (dir / "built").string(), "--card",
                 file.string()});
    test::expect_one_line_error(r, file.string() + ": " + problem);
    EXPECT_FALSE(fs::exists(dir / "built")) << "nothing is built before the text is checked";
  }
  auto r = run_cli({"card", model.string(), "--text", (dir / "empty.txt").string()});
  test::expect_one_line_error(r, "missing required flag --reference");
  r = run_cli({"card", "--reference", model.string(), "--text", (dir / "empty.txt").string()});
  test::expect_one_line_error(r, "expected one model folder");
  r = run_cli({"card", model.string(), "--reference", dir.path().string(), "--text", (dir / "empty.txt").string()});
  test::expect_one_line_error(r, "neither a checkpoint");
  r = run_cli({"build", "--checkpoint", (dir / "ckpt").string(), "--out", (dir / "built").string(), "--card-tokens", "64"});
  test::expect_one_line_error(r, "--card-tokens: needs --card TEXT_FILE");
  // The golden checkpoint has no tokenizer: --card cannot encode its text.
  r = run_cli({"build", "--checkpoint", golden_checkpoint().string(), "--out", (dir / "built").string(), "--card",
               write_text(dir, "card.txt", kText).string()});
  test::expect_one_line_error(r, "no tokenizer.json");
  EXPECT_FALSE(fs::exists(dir / "built"));
}

TEST(FidelityCardCli, BuildWritesTheCard) {
  TempDir dir;
  fs::copy(golden_checkpoint(), dir / "tiny-a-tok", fs::copy_options::recursive);
  std::ofstream(dir / "tiny-a-tok" / "tokenizer.json") << test::tiny_tokenizer_json();
  const fs::path text = write_text(dir, "card.txt", kText);
  // A 40-token context: the card's windows shrink to fit it.
  auto r = run_cli({"build", "--checkpoint", (dir / "tiny-a-tok").string(), "--out", (dir / "m").string(),
                    "--context-length", "40", "--card", text.string(), "--card-tokens", "90", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fidelity (vs tiny-a-tok float64, 90 tokens of card.txt)"), std::string::npos) << r.out;
  const ordered_json card = ordered_json::parse(test::read_text(dir / "m" / "fidelity.json"));
  EXPECT_LT(num(card, "kl", "max"), 1e-6);
  EXPECT_EQ(card["reference"], (ordered_json{{"kind", "checkpoint"}, {"name", "tiny-a-tok"}}));
  EXPECT_EQ(card["settings"], (ordered_json{{"context", 40}, {"max_tokens", 90}}));
  EXPECT_EQ(card["windows"], 3);  // 40 + 40 + 10
}

// ---- serve ---------------------------------------------------------------------------

TEST(FidelityCardServe, ModelsListsTheCard) {
  TempDir dir;
  const fs::path model = model_with_tokenizer(dir);
  auto models_json = [&] {
    auto engine = Engine::load(model, EngineOptions{.threads = 1});
    serve::Scheduler scheduler(engine, serve::SchedulerOptions{.parallel = 1});
    serve::Service service(engine, ChatTemplate::builtin(), scheduler, {"tiny"});
    return service.models();
  };
  EXPECT_FALSE(models_json()["data"][0].contains("fidelity"));
  const ordered_json card = measure::write_fidelity_card(model, small_options(write_text(dir, "card.txt", kText), model));
  const ordered_json m = models_json()["data"][0];
  EXPECT_EQ(m["id"], "tiny");
  EXPECT_EQ(m["fidelity"], card);
  // A card that does not parse stops the server at start.
  std::ofstream(model / "fidelity.json") << "[1,";
  EXPECT_NE(error_message([&] { models_json(); }).find((model / "fidelity.json").string() + ": not valid JSON"),
            std::string::npos);
}

}  // namespace
}  // namespace deltagen
