// The generation runtime against the golden set: the fp32 ONNX graph built
// from the golden checkpoint, run through the prefill/decode loop (library
// and CLI), must reproduce the Hugging Face logits, states and greedy tokens.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "models/build.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "runtime/snapshot.h"
#include "runtime/tensor.h"
#include "deltagen/deltagen.h"
#include "runtime/generation.h"
#include "runtime_fixtures.h"
#include "test_util.h"
#include "deltagen/error.h"
#include "util/npy.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::golden_checkpoint;
using test::golden_file;
using test::max_abs_diff;
using test::run_cli;
using test::TempDir;

constexpr double kTolerance = 1e-4;  // fp32 vs the fp32 HF reference (noise is ~3e-5)
constexpr int64_t kVocab = 512;

// The golden model built once per test process (the build is the slow part).
const fs::path& built_model_dir() { return test::golden_model_dir(); }
Model& built_model() { return test::golden_runtime_model(); }

std::vector<int64_t> golden_prompt() {
  auto summary = nlohmann::json::parse(test::read_text(golden_file("summary.json")));
  return summary.at("prompt_ids").get<std::vector<int64_t>>();
}

std::vector<float> golden_f32(const std::string& name) { return read_npy(golden_file(name)).as_f32(); }

// Rows [first, first + count) of a [rows, kVocab] array.
std::vector<float> rows(const std::vector<float>& data, int64_t first, int64_t count) {
  return std::vector<float>(data.begin() + first * kVocab, data.begin() + (first + count) * kVocab);
}

// Prefill logits of `prompt` fed in runs of `chunk` tokens, [prompt, vocab].
std::vector<float> chunked_prefill_logits(Generator& gen, std::span<const int64_t> prompt, size_t chunk) {
  std::vector<float> out;
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    Logits l = gen.forward(prompt.subspan(begin, std::min(chunk, prompt.size() - begin)), true);
    out.insert(out.end(), l.data.begin(), l.data.end());
  }
  return out;
}

// The last K-1 = 3 of the 4 columns of a golden [1, C, 4] conv state: ORT's
// CausalConvWithState keeps only the columns that affect future outputs.
std::vector<float> golden_conv_state_tail(const std::string& name) {
  NpyArray a = read_npy(golden_file(name));
  const int64_t channels = a.shape.at(1), width = a.shape.at(2);
  std::vector<float> all = a.as_f32(), tail;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 1; t < width; ++t) tail.push_back(all[size_t(c * width + t)]);
  return tail;
}

// ---- the library loop -----------------------------------------------------------

TEST(RuntimeGolden, DiscoversHybridLayoutFromSessionInputs) {
  const ModelIo& io = built_model().io();
  EXPECT_EQ(io.full_attention_layers(), (std::vector<int64_t>{3}));
  EXPECT_EQ(io.linear_attention_layers(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(io.has_attention_mask);
  EXPECT_TRUE(io.has_position_ids);
  EXPECT_EQ(built_model().vocab_size(), kVocab);
  const auto& conv = io.cache(0, CacheKind::ConvState).shape;
  EXPECT_EQ(std::vector<int64_t>(conv.begin() + 1, conv.end()), (std::vector<int64_t>{128, 3}));
  const auto& rec = io.cache(2, CacheKind::RecurrentState).shape;
  EXPECT_EQ(std::vector<int64_t>(rec.begin() + 1, rec.end()), (std::vector<int64_t>{4, 16, 16}));
  const auto& key = io.cache(3, CacheKind::Key);
  EXPECT_EQ(key.output_name, "present.3.key");
  EXPECT_EQ(key.shape[1], 2);
  EXPECT_EQ(key.shape[3], 16);
  EXPECT_GT(built_model().config().context_length, 0);
}

TEST(RuntimeGolden, PrefillLogitsMatchGolden) {
  Generator gen(built_model());
  const auto prompt = golden_prompt();
  Logits l = gen.forward(prompt, true);
  ASSERT_EQ(l.rows, int64_t(prompt.size()));
  ASSERT_EQ(l.vocab, kVocab);
  const double err = max_abs_diff(l.data, golden_f32("logits_prefill.npy"));
  RecordProperty("max_abs_diff", std::to_string(err));
  EXPECT_LE(err, kTolerance);
}

TEST(RuntimeGolden, LastPositionOnlyIsTheLastPrefillRow) {
  Generator gen(built_model());
  const auto prompt = golden_prompt();
  Logits last = gen.forward(prompt, false);
  ASSERT_EQ(last.rows, 1);
  EXPECT_LE(max_abs_diff(last.data, rows(golden_f32("logits_prefill.npy"), int64_t(prompt.size()) - 1, 1)),
            kTolerance);
}

TEST(RuntimeGolden, Prefill7ThenFiveDecodeStepsMatchGolden) {
  Generator gen(built_model());
  const auto prompt = golden_prompt();
  std::span<const int64_t> ids(prompt);
  std::vector<float> got = gen.forward(ids.first(7), true).data;
  for (size_t t = 7; t < prompt.size(); ++t) {
    Logits step = gen.forward(ids.subspan(t, 1), true);
    got.insert(got.end(), step.data.begin(), step.data.end());
  }
  EXPECT_EQ(gen.state().past_length(), 12);
  const double err = max_abs_diff(got, golden_f32("logits_prefill7_decode5.npy"));
  RecordProperty("max_abs_diff", std::to_string(err));
  EXPECT_LE(err, kTolerance);
}

TEST(RuntimeGolden, Greedy16TokensAndStepLogitsMatchGolden) {
  Generator gen(built_model());
  const auto prompt = golden_prompt();
  GenerateOptions opts;
  opts.max_new_tokens = 16;
  opts.collect_logits = true;
  GenerateResult r = generate_greedy(gen, prompt, opts);

  EXPECT_EQ(r.generated_ids, read_npy(golden_file("greedy_tokens.npy")).as_i64());
  EXPECT_EQ(r.decode_steps, 15);
  ASSERT_EQ(r.logits_rows, int64_t(prompt.size()) + 15);
  // Row prompt-1+j produced new token j.
  const double err = max_abs_diff(rows(r.logits, int64_t(prompt.size()) - 1, 16), golden_f32("greedy_step_logits.npy"));
  RecordProperty("max_abs_diff", std::to_string(err));
  EXPECT_LE(err, kTolerance);
  EXPECT_LE(max_abs_diff(rows(r.logits, 0, int64_t(prompt.size())), golden_f32("logits_prefill.npy")), kTolerance);
  EXPECT_GT(r.prefill_seconds, 0);
  EXPECT_GT(r.generation_tokens_per_second(), 0);
}

TEST(RuntimeGolden, ChunkedGreedyGivesTheSameTokens) {
  const auto prompt = golden_prompt();
  const auto golden_tokens = read_npy(golden_file("greedy_tokens.npy")).as_i64();
  for (int64_t chunk : {1, 5}) {
    Generator gen(built_model());
    GenerateOptions opts;
    opts.max_new_tokens = 16;
    opts.prefill_chunk = chunk;
    GenerateResult r = generate_greedy(gen, prompt, opts);
    EXPECT_EQ(r.generated_ids, golden_tokens) << "prefill chunk " << chunk;
    EXPECT_EQ(r.prefill_runs, (int64_t(prompt.size()) + chunk - 1) / chunk);
  }
}

TEST(RuntimeGolden, LinearStateAfterPrefill7And12MatchesGolden) {
  const auto prompt = golden_prompt();
  for (size_t n : {7, 12}) {
    Generator gen(built_model());
    gen.forward(std::span<const int64_t>(prompt).first(n), false);
    const std::string suffix = std::to_string(n) + ".npy";

    const Ort::Value& conv = gen.state().tensor(0, CacheKind::ConvState);
    EXPECT_EQ(tensor_shape(conv), (std::vector<int64_t>{1, 128, 3}));
    const double conv_err = max_abs_diff(tensor_to_f32(conv), golden_conv_state_tail("layer0_conv_state_after_prefill" + suffix));
    EXPECT_LE(conv_err, kTolerance) << "conv state after " << n;

    const Ort::Value& rec = gen.state().tensor(0, CacheKind::RecurrentState);
    EXPECT_EQ(tensor_shape(rec), (std::vector<int64_t>{1, 4, 16, 16}));
    const double rec_err = max_abs_diff(tensor_to_f32(rec), golden_f32("layer0_recurrent_state_after_prefill" + suffix));
    EXPECT_LE(rec_err, kTolerance) << "recurrent state after " << n;
    RecordProperty("conv_err_" + std::to_string(n), std::to_string(conv_err));
    RecordProperty("rec_err_" + std::to_string(n), std::to_string(rec_err));
  }
}

TEST(RuntimeGolden, PromptInChunksOf1And3And12GivesPrefillLogits) {
  const auto prompt = golden_prompt();
  const auto golden = golden_f32("logits_prefill.npy");
  for (size_t chunk : {1, 3, 12}) {
    Generator gen(built_model());
    const double err = max_abs_diff(chunked_prefill_logits(gen, prompt, chunk), golden);
    EXPECT_LE(err, kTolerance) << "chunk " << chunk;
    RecordProperty("chunk_err_" + std::to_string(chunk), std::to_string(err));
  }
}

TEST(RuntimeGolden, KvCacheIsAllocatedOnceAndSharedBetweenPastAndPresent) {
  Generator gen(built_model(), 1, 64);
  const auto prompt = golden_prompt();
  std::span<const int64_t> ids(prompt);
  const Ort::Value& key = gen.state().tensor(3, CacheKind::Key);
  const void* key_data = key.GetTensorRawData();
  const void* rec_data = gen.state().tensor(0, CacheKind::RecurrentState).GetTensorRawData();
  // max_length 64 + the spare slot parked rows write to.
  EXPECT_EQ(tensor_shape(key), (std::vector<int64_t>{1, 2, 65, 16}));
  gen.forward(ids.first(7), false);
  EXPECT_EQ(gen.state().past_length(), 7);
  gen.forward(ids.subspan(7, 1), false);
  EXPECT_EQ(gen.state().past_length(), 8);
  EXPECT_EQ(gen.state().tokens(0), std::vector<int64_t>(prompt.begin(), prompt.begin() + 8));
  // The graph wrote into the same buffers: nothing was reallocated.
  EXPECT_EQ(gen.state().tensor(3, CacheKind::Key).GetTensorRawData(), key_data);
  EXPECT_EQ(gen.state().tensor(0, CacheKind::RecurrentState).GetTensorRawData(), rec_data);
  EXPECT_EQ(tensor_shape(gen.state().tensor(3, CacheKind::Value)), (std::vector<int64_t>{1, 2, 65, 16}));
  // Keys of the 8 positions are written, the rest of the buffer is still zero.
  const std::vector<float> k = tensor_to_f32(key);
  auto at = [&](int64_t head, int64_t pos, int64_t d) { return k[size_t((head * 65 + pos) * 16 + d)]; };
  double written = 0, beyond = 0;
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t d = 0; d < 16; ++d) {
      for (int64_t p = 0; p < 8; ++p) written += std::abs(at(h, p, d));
      for (int64_t p = 8; p < 65; ++p) beyond += std::abs(at(h, p, d));
    }
  EXPECT_GT(written, 0);
  EXPECT_EQ(beyond, 0);
}

TEST(RuntimeGolden, ResetStartsOverFromZeroState) {
  Generator gen(built_model());
  const auto prompt = golden_prompt();
  gen.forward(prompt, false);
  gen.reset();
  EXPECT_EQ(gen.state().past_length(), 0);
  EXPECT_LE(max_abs_diff(gen.forward(prompt, true).data, golden_f32("logits_prefill.npy")), kTolerance);
}

TEST(RuntimeGolden, BatchOfTwoEqualRowsMatchesGoldenPerRow) {
  Generator gen(built_model(), 2);
  const auto prompt = golden_prompt();
  const auto golden = golden_f32("logits_prefill7_decode5.npy");
  std::vector<int64_t> both(prompt.begin(), prompt.begin() + 7);
  both.insert(both.end(), prompt.begin(), prompt.begin() + 7);
  Logits prefill = gen.forward(both, true);
  ASSERT_EQ(prefill.batch, 2);
  for (int64_t b = 0; b < 2; ++b)
    EXPECT_LE(max_abs_diff(std::vector<float>(prefill.row(b, 0), prefill.row(b, 0) + 7 * kVocab), rows(golden, 0, 7)),
              kTolerance);
  for (int64_t t = 7; t < 12; ++t) {
    const std::vector<int64_t> step = {prompt[size_t(t)], prompt[size_t(t)]};
    Logits l = gen.forward(step, false);
    for (int64_t b = 0; b < 2; ++b)
      EXPECT_LE(max_abs_diff(std::vector<float>(l.row(b, 0), l.row(b, 0) + kVocab), rows(golden, t, 1)), kTolerance)
          << "row " << b << " position " << t;
  }
}

TEST(RuntimeGolden, RejectsOutOfVocabularyAndTooLongRequests) {
  Model& model = built_model();
  const std::vector<int64_t> bad_id = {5, kVocab};
  EXPECT_THROW(check_request(model, bad_id, 1), Error);
  const std::vector<int64_t> ok = {5, 17};
  EXPECT_NO_THROW(check_request(model, ok, 4));
  EXPECT_THROW(check_request(model, ok, model.config().context_length), Error);
  EXPECT_THROW(check_request(model, std::vector<int64_t>{}, 1), Error);
}

// ---- the generation loop: batches, limits, bad requests ----------------------------

GenerationOptions greedy(int64_t new_tokens) {
  GenerationOptions o;
  o.max_new_tokens = new_tokens;
  o.stop_at_eos = false;
  return o;
}

std::vector<GenerationResult> run_rows(const std::vector<std::vector<int64_t>>& prompts, const GenerationOptions& o,
                                       int64_t max_length = 64) {
  Generator gen(built_model(), int64_t(prompts.size()), max_length);
  return generate_rows(gen, prompts, o, nullptr, {});
}

std::vector<float> row_range(const GenerationResult& r, int64_t first, int64_t count) {
  return std::vector<float>(r.logits.begin() + first * kVocab, r.logits.begin() + (first + count) * kVocab);
}

TEST(RuntimeBatch, ThreeEqualRowsGiveTheGoldenTokensAndLogits) {
  GenerationOptions o = greedy(16);
  o.collect_logits = true;
  const auto prompt = golden_prompt();
  const auto results = run_rows({prompt, prompt, prompt}, o);
  ASSERT_EQ(results.size(), 3u);
  for (const GenerationResult& r : results) {
    EXPECT_EQ(r.generated_ids, test::golden_greedy_ids());
    ASSERT_EQ(r.logits_rows, 12 + 15);
    EXPECT_LE(max_abs_diff(row_range(r, 0, 12), golden_f32("logits_prefill.npy")), kTolerance);
    EXPECT_LE(max_abs_diff(row_range(r, 11, 16), golden_f32("greedy_step_logits.npy")), kTolerance);
    EXPECT_EQ(r.decode_steps, 15);
  }
}

TEST(RuntimeBatch, RowsOfDifferentLengthsMatchSingleRuns) {
  const auto p = golden_prompt();
  const std::vector<std::vector<int64_t>> prompts = {p, {p.begin(), p.begin() + 7}, {p[3], p[4], p[5]}, {42}};
  GenerationOptions o = greedy(10);
  o.collect_logits = true;
  const auto batch = run_rows(prompts, o);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const GenerationResult single = run_rows({prompts[i]}, o).at(0);
    EXPECT_EQ(batch[i].generated_ids, single.generated_ids) << "row " << i;
    EXPECT_LE(max_abs_diff(batch[i].logits, single.logits), kTolerance) << "row " << i;
    EXPECT_EQ(batch[i].prefilled_tokens, int64_t(prompts[i].size()));
  }
}

TEST(RuntimeBatch, EachRowSamplesWithItsOwnSeed) {
  GenerationOptions o = greedy(12);
  o.sampling.temperature = 1.0;
  o.sampling.top_p = 0.95;
  o.sampling.seed = 11;
  const auto p = golden_prompt();
  const auto batch = run_rows({p, p, p}, o);
  for (int64_t row = 0; row < 3; ++row) {
    GenerationOptions single = o;
    single.sampling.seed = 11 + uint64_t(row);
    EXPECT_EQ(batch[size_t(row)].generated_ids, run_rows({p}, single).at(0).generated_ids) << "row " << row;
  }
  EXPECT_NE(batch[0].generated_ids, batch[1].generated_ids);
}

TEST(RuntimeBatch, RowsStopOnTheirOwn) {
  const auto p = golden_prompt();
  GenerationOptions o = greedy(8);
  o.extra_stop_ids = {490};  // the golden prompt's second greedy token
  const std::vector<std::vector<int64_t>> prompts = {p, {p.begin(), p.begin() + 7}};
  const auto batch = run_rows(prompts, o);
  EXPECT_EQ(batch[0].generated_ids, (std::vector<int64_t>{77, 490}));
  EXPECT_EQ(batch[0].stop_reason, StopReason::Eos);
  EXPECT_EQ(batch[0].decode_steps, 1);
  EXPECT_EQ(batch[1].generated_ids, run_rows({prompts[1]}, o).at(0).generated_ids);
}

TEST(RuntimeBatch, AParkedRowIsLeftExactlyAsItWas) {
  Generator gen(built_model(), 2, 32);
  const auto p = golden_prompt();
  gen.run_row(0, std::span<const int64_t>(p).first(5), false);
  gen.run_row(1, std::span<const int64_t>(p).first(9), false);
  const StateSnapshot before = capture_row(gen.state(), 0, kVocab, {});
  gen.state().park(0);
  for (int64_t t = 0; t < 4; ++t) gen.step(std::vector<int64_t>{0, p[size_t(9 + t % 3)]});
  gen.state().unpark(0);
  const StateSnapshot after = capture_row(gen.state(), 0, kVocab, {});
  EXPECT_EQ(after.tokens, before.tokens);
  ASSERT_EQ(after.caches.size(), before.caches.size());
  for (size_t c = 0; c < before.caches.size(); ++c) EXPECT_TRUE(after.caches[c].data == before.caches[c].data) << c;
  EXPECT_EQ(gen.state().length(1), 13);
}

TEST(RuntimeGolden, GenerationStopsWhenTheStateIsFull) {
  const auto results = run_rows({golden_prompt()}, greedy(100), 16);
  const auto golden = test::golden_greedy_ids();
  // 12 prompt tokens + 4 fed back fill 16; the 5th new token is chosen but not run.
  EXPECT_EQ(results[0].generated_ids, std::vector<int64_t>(golden.begin(), golden.begin() + 5));
  EXPECT_EQ(results[0].stop_reason, StopReason::Length);
}

using test::expect_error;

TEST(RuntimeGolden, BadRequestsAreClearErrorsAndLeaveTheStateAlone) {
  Generator gen(built_model(), 1, 8);
  auto run = [&](std::vector<int64_t> prompt) {
    const std::vector<std::vector<int64_t>> feeds = {prompt};
    generate_rows(gen, feeds, greedy(2), nullptr, {});
  };
  expect_error([&] { run(golden_prompt()); }, "does not fit the maximum length 8");
  expect_error([&] { run({5, kVocab}); }, "token id 512 is outside the vocabulary");
  expect_error([&] { run({}); }, "the prompt is empty");
  expect_error([&] { run({-1}); }, "token id -1 is outside the vocabulary");
  GenerationOptions with_stop = greedy(2);
  with_stop.stop_strings = {"x"};
  expect_error([&] { generate_rows(gen, std::vector<std::vector<int64_t>>{{5}}, with_stop, nullptr, {}); },
               "stop strings need a tokenizer");
  EXPECT_EQ(gen.state().past_length(), 0);
  expect_error([&] { Generator(built_model(), 1, 1 << 20); }, "exceeds the model's context length");
}

// ---- the CLI ----------------------------------------------------------------------

std::string joined(const std::vector<int64_t>& ids, char separator) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += separator;
    s += std::to_string(ids[i]);
  }
  return s;
}
std::string ids_arg(const std::vector<int64_t>& ids) { return joined(ids, ','); }

TEST(RuntimeCli, GeneratePrintsGoldenContinuation) {
  auto r = run_cli({"generate", "--model", built_model_dir().string(), "--ids", ids_arg(golden_prompt()),
                    "--max-new-tokens", "16", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, joined(read_npy(golden_file("greedy_tokens.npy")).as_i64(), ' ') + "\n");
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

TEST(RuntimeCli, LogitsOutHoldsPromptRowsThenStepRows) {
  TempDir tmp;
  const fs::path out = tmp / "logits.npy";
  auto r = run_cli({"generate", "--model", built_model_dir().string(), "--ids", ids_arg(golden_prompt()),
                    "--max-new-tokens", "16", "--prefill-chunk", "5", "--logits-out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  NpyArray a = read_npy(out);
  EXPECT_EQ(a.descr, "<f4");
  ASSERT_EQ(a.shape, (std::vector<int64_t>{27, kVocab}));
  const auto got = a.as_f32();
  EXPECT_LE(max_abs_diff(rows(got, 0, 12), golden_f32("logits_prefill.npy")), kTolerance);
  EXPECT_LE(max_abs_diff(rows(got, 11, 16), golden_f32("greedy_step_logits.npy")), kTolerance);
}

TEST(RuntimeCli, JsonReportsIdsAndSpeed) {
  const auto prompt = golden_prompt();
  auto r = run_cli({"generate", "--model", built_model_dir().string(), "--ids", ids_arg(prompt),
                    "--max-new-tokens", "4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("prompt_ids").get<std::vector<int64_t>>(), prompt);
  EXPECT_EQ(j.at("generated_ids").get<std::vector<int64_t>>(), (std::vector<int64_t>{77, 490, 490, 381}));
  for (const char* key : {"prefill_seconds", "prompt_tokens_per_second", "generation_tokens_per_second",
                          "decode_seconds", "decode_steps"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_GT(j.at("prompt_tokens_per_second").get<double>(), 0);
  EXPECT_EQ(j.at("decode_steps").get<int64_t>(), 3);
}

TEST(RuntimeCli, StopAtEosEndsAfterTheFirstEosToken) {
  // A copy of the model whose genai_config lists the second greedy token (490) as EOS.
  TempDir tmp;
  const fs::path model = tmp / "model";
  fs::copy(built_model_dir(), model, fs::copy_options::recursive);
  auto config = nlohmann::json::parse(test::read_text(model / "genai_config.json"));
  config["model"]["eos_token_id"] = {490, 511};
  std::ofstream(model / "genai_config.json") << config.dump(2);

  const std::vector<std::string> base = {"generate", "--model", model.string(), "--ids", ids_arg(golden_prompt()),
                                         "--max-new-tokens", "16", "--json"};
  for (const char* stop_flag : {"", "--stop-at-eos"}) {  // stopping at EOS is the default
    auto args = base;
    if (*stop_flag) args.push_back(stop_flag);
    auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("generated_ids").get<std::vector<int64_t>>(), (std::vector<int64_t>{77, 490}));
    EXPECT_TRUE(j.at("stopped_at_eos").get<bool>());
    EXPECT_EQ(j.at("stop_reason").get<std::string>(), "eos");
  }

  // --ignore-eos goes on.
  auto ignoring = base;
  ignoring.push_back("--ignore-eos");
  auto r = run_cli(ignoring);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("generated_ids").size(), 16u);
}

TEST(RuntimeCli, BatchOfThreeEqualPromptsPrintsTheGoldenTokensThreeTimes) {
  const std::string p = ids_arg(golden_prompt());
  auto r = run_cli({"generate", "--model", built_model_dir().string(), "--ids", p + ";" + p + ";" + p,
                    "--max-new-tokens", "16", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string line = joined(test::golden_greedy_ids(), ' ') + "\n";
  EXPECT_EQ(r.out, line + line + line);
}

TEST(RuntimeCli, BatchJsonHasOneSequencePerPromptInOrder) {
  const auto p = golden_prompt();
  auto r = run_cli({"generate", "--model", built_model_dir().string(), "--ids", ids_arg(p) + ";5,17,300",
                    "--max-new-tokens", "6", "--json", "--ignore-eos"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("batch").get<int64_t>(), 2);
  const auto& rows = j.at("sequences");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("prompt_ids").get<std::vector<int64_t>>(), p);
  const std::vector<int64_t> golden = test::golden_greedy_ids();
  EXPECT_EQ(rows[0].at("generated_ids").get<std::vector<int64_t>>(), std::vector<int64_t>(golden.begin(), golden.begin() + 6));
  EXPECT_EQ(rows[1].at("generated_ids").get<std::vector<int64_t>>(),
            run_rows({{5, 17, 300}}, greedy(6)).at(0).generated_ids);
}

TEST(RuntimeCli, SeededSamplingIsTheSameInEveryProcess) {
  auto sample = [](const std::string& seed) {
    auto r = run_cli({"generate", "--model", built_model_dir().string(), "--ids", ids_arg(golden_prompt()),
                      "--max-new-tokens", "12", "--temperature", "1.0", "--top-k", "50", "--seed", seed});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string first = sample("5");
  EXPECT_EQ(sample("5"), first);
  EXPECT_NE(sample("6"), first);
  GenerationOptions o = greedy(12);
  o.stop_at_eos = true;
  o.sampling.temperature = 1.0;
  o.sampling.top_k = 50;
  o.sampling.seed = 5;
  EXPECT_EQ(first, joined(run_rows({golden_prompt()}, o).at(0).generated_ids, ' ') + "\n");
}

struct BadGenerate {
  std::string name;
  std::vector<std::string> args;  // after "generate"; {model} and {out} are substituted
};

class GenerateCliErrors : public ::testing::TestWithParam<BadGenerate> {};

TEST_P(GenerateCliErrors, ExitNonzeroWithOneLineErrorAndNoOutputFile) {
  TempDir tmp;
  const fs::path out = tmp / "logits.npy";
  // A folder with the config but without the model file.
  fs::create_directories(tmp / "no-onnx");
  fs::copy_file(built_model_dir() / "genai_config.json", tmp / "no-onnx" / "genai_config.json");

  std::vector<std::string> args = {"generate"};
  for (std::string a : GetParam().args) {
    if (a == "{model}") a = built_model_dir().string();
    if (a == "{no-onnx}") a = (tmp / "no-onnx").string();
    if (a == "{missing}") a = (tmp / "missing").string();
    if (a == "{out}") a = out.string();
    args.push_back(a);
  }
  auto r = run_cli(args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1)
      << "a stray file was left in the output folder";
}

INSTANTIATE_TEST_SUITE_P(
    RuntimeCli, GenerateCliErrors,
    ::testing::Values(
        BadGenerate{"MissingModelDir", {"--model", "{missing}", "--ids", "5,17", "--max-new-tokens", "2", "--logits-out", "{out}"}},
        BadGenerate{"MissingModelOnnx", {"--model", "{no-onnx}", "--ids", "5,17", "--max-new-tokens", "2", "--logits-out", "{out}"}},
        BadGenerate{"TokenIdAtVocabSize", {"--model", "{model}", "--ids", "5,512", "--max-new-tokens", "2", "--logits-out", "{out}"}},
        BadGenerate{"MalformedIds", {"--model", "{model}", "--ids", "5,,17", "--max-new-tokens", "2", "--logits-out", "{out}"}},
        BadGenerate{"NonNumericIds", {"--model", "{model}", "--ids", "five", "--max-new-tokens", "2", "--logits-out", "{out}"}},
        BadGenerate{"NegativeId", {"--model", "{model}", "--ids", "5,-1", "--max-new-tokens", "2", "--logits-out", "{out}"}},
        BadGenerate{"LongerThanContext", {"--model", "{model}", "--ids", "5,17", "--max-new-tokens", "100000", "--logits-out", "{out}"}},
        BadGenerate{"ZeroNewTokens", {"--model", "{model}", "--ids", "5,17", "--max-new-tokens", "0", "--logits-out", "{out}"}},
        BadGenerate{"EmptyIdsRow", {"--model", "{model}", "--ids", "5,17;", "--logits-out", "{out}"}},
        BadGenerate{"EmptyPrompt", {"--model", "{model}", "--prompt", "", "--logits-out", "{out}"}},
        BadGenerate{"TwoPromptSources", {"--model", "{model}", "--ids", "5", "--prompt", "hi", "--logits-out", "{out}"}},
        BadGenerate{"TextWithoutTokenizer", {"--model", "{model}", "--prompt", "hello", "--logits-out", "{out}"}},
        BadGenerate{"StopStringWithoutTokenizer", {"--model", "{model}", "--ids", "5", "--stop", "x", "--logits-out", "{out}"}},
        BadGenerate{"NegativeTemperature", {"--model", "{model}", "--ids", "5", "--temperature", "-1", "--logits-out", "{out}"}},
        BadGenerate{"TopPAboveOne", {"--model", "{model}", "--ids", "5", "--top-p", "1.5", "--logits-out", "{out}"}},
        BadGenerate{"BatchWithLogitsOut", {"--model", "{model}", "--ids", "5;6", "--logits-out", "{out}"}},
        BadGenerate{"PromptLongerThanMaxLength", {"--model", "{model}", "--ids", "5,17,300,42,7", "--max-length", "4", "--logits-out", "{out}"}},
        BadGenerate{"MaxLengthOverContext", {"--model", "{model}", "--ids", "5", "--max-length", "100000", "--logits-out", "{out}"}},
        BadGenerate{"MissingStateFile", {"--model", "{model}", "--ids", "5", "--load-state", "{missing}", "--logits-out", "{out}"}},
        BadGenerate{"NegativePrefillChunk", {"--model", "{model}", "--ids", "5,17", "--max-new-tokens", "2", "--prefill-chunk", "-3", "--logits-out", "{out}"}},
        BadGenerate{"UnknownFlag", {"--model", "{model}", "--ids", "5,17", "--max-new-tokens", "2", "--bogus", "1", "--logits-out", "{out}"}}),
    [](const ::testing::TestParamInfo<BadGenerate>& info) { return info.param.name; });

}  // namespace
}  // namespace deltagen
