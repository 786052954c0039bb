// Drafting with the MTP head (speculative/mtp_draft.h, `--speculative mtp`):
// the guesses are the float64 reference head's, slot for slot and chained,
// across rounds; the output of the loop is the plain loop's whatever the
// head guesses; a model without a head, or a head from another model, is a
// one-line error.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "checkpoint/checkpoint.h"
#include "deltagen/error.h"
#include "graph/model_summary.h"
#include "models/build.h"
#include "reference/qwen35_reference.h"
#include "runtime/generation.h"
#include "runtime_fixtures.h"
#include "serve/scheduler.h"
#include "serve/service.h"
#include "chat/chat_template.h"
#include "runtime/tensor.h"
#include "speculative/mtp_draft.h"
#include "synth/synth.h"
#include "test_util.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;

// The tiny preset (the golden shapes; "tiny-moe": experts), untied, with a
// head, written in fp32.
fs::path write_checkpoint(const fs::path& dir, int64_t hidden_size = 0, const char* preset = "tiny") {
  ModelConfig c = synth_preset(preset);
  c.tie_word_embeddings = false;
  c.mtp_num_hidden_layers = 1;
  if (hidden_size > 0) c.hidden_size = hidden_size;
  SynthOptions o;
  o.seed = 5;
  o.dtype = DType::F32;
  write_synthetic_checkpoint(c, o, dir);
  return dir;
}

struct Built {
  test::TempDir tmp;
  fs::path checkpoint, fp32, int4;
  fs::path moe_checkpoint, moe_fp32;  // a MoE model: its head's MLP is a MoE MLP
};

const Built& built() {
  static Built b = [] {
    Built out;
    out.checkpoint = write_checkpoint(out.tmp / "ck");
    auto ck = Checkpoint::open(out.checkpoint);
    BuildOptions o;
    o.context_length = 256;
    o.show_progress = false;
    build_model(*ck, o, out.fp32 = out.tmp / "fp32");
    std::ofstream(out.fp32 / "tokenizer.json") << test::tiny_tokenizer_json();  // for the server's test
    std::ofstream(out.fp32 / "tokenizer_config.json") << test::tiny_tokenizer_config_json();
    o.precision = Precision::Int4;
    build_model(*ck, o, out.int4 = out.tmp / "int4");
    out.moe_checkpoint = write_checkpoint(out.tmp / "moe-ck", 0, "tiny-moe");
    o.precision = Precision::Fp32;
    build_model(*Checkpoint::open(out.moe_checkpoint), o, out.moe_fp32 = out.tmp / "moe-fp32");
    return out;
  }();
  return b;
}

// True when `token` is (within `tolerance`) a largest entry of the row.
bool is_argmax(const double* row, int64_t vocab, int64_t token, double tolerance) {
  return row[token] >= *std::max_element(row, row + vocab) - tolerance;
}

// The drafter's guesses against ReferenceModel::mtp_forward: a prompt's slots
// and two chained guesses; then, after two more decoder positions, a second
// round, whose reference is a fresh head over every slot: so the chained
// entries of round one must have been dropped from the head's cache. Dense
// and MoE.
class MtpDraftBoth : public ::testing::TestWithParam<bool> {};

TEST_P(MtpDraftBoth, TheGuessesAreTheReferenceHeads) {
  const bool moe = GetParam();
  auto ck = Checkpoint::open(moe ? built().moe_checkpoint : built().checkpoint);
  const ReferenceModel ref(*ck);
  auto model = Model::load(moe ? built().moe_fp32 : built().fp32, {.intra_op_threads = 1});
  Generator gen(*model, 1, 64);
  const size_t hidden_output = gen.fetch_output(MtpDrafter::kDecoderHidden);
  MtpDrafter drafter(*model, 1, 64);
  auto observe = [&](int64_t position, int64_t rows) {
    const auto* data = static_cast<const std::byte*>(gen.fetched(hidden_output).GetTensorRawData());
    drafter.observe(0, position, data, rows);
  };

  Ids run = {5, 17, 300, 42, 7, 99, 123, 256};  // the positions the decoder has run
  gen.run_row(0, run, false);
  observe(0, int64_t(run.size()));
  const int64_t vocab = ck->config().vocab_size, H = ck->config().hidden_size;
  struct Round {
    int64_t chosen;  // the row's chosen, not yet run token
    Ids then_run;    // what the decoder runs after the round
  };
  for (const Round& round : {Round{11, {11, 3}}, Round{4, {}}}) {
    SCOPED_TRACE("after " + std::to_string(run.size()) + " positions");
    Ids context = run;
    context.push_back(round.chosen);
    const Ids guesses = drafter.draft(0, context, 3);
    ASSERT_EQ(guesses.size(), 3u);

    ReferenceState state = ref.new_state();
    ReferenceTrace trace;
    ref.forward(run, state, &trace);
    const Matrix64 hidden = ref.final_norm(trace.hidden.back());
    ReferenceMtpState ms = ref.new_mtp_state();
    Matrix64 hm;
    Matrix64 logits = ref.mtp_forward(Ids(context.begin() + 1, context.end()), hidden, ms, &hm);
    for (size_t j = 0; j < guesses.size(); ++j) {
      ASSERT_TRUE(is_argmax(logits.row(logits.rows - 1), vocab, guesses[j], 1e-3)) << "guess " << j;
      Matrix64 chained(1, H);
      std::copy(hm.row(hm.rows - 1), hm.row(hm.rows - 1) + H, chained.row(0));
      logits = ref.mtp_forward({guesses[j]}, chained, ms, &hm);
    }
    if (round.then_run.empty()) continue;
    gen.run_row(0, round.then_run, false);
    observe(int64_t(run.size()), int64_t(round.then_run.size()));
    run.insert(run.end(), round.then_run.begin(), round.then_run.end());
  }
  Ids context = run;
  context.push_back(4);
  EXPECT_TRUE(drafter.draft(0, context, 2).empty());  // no position ran since: nothing new to guess from
}

INSTANTIATE_TEST_SUITE_P(MtpDraft, MtpDraftBoth, ::testing::Values(false, true),
                         [](const auto& info) { return std::string(info.param ? "moe" : "dense"); });

// The same through the loop, with rounds whose guesses all stand (the
// bench's ceiling switch keeps them): each round, the head must have taken
// the verify run's hidden states of every kept position. Round r's guesses
// are then the reference head's over every slot so far.
TEST(MtpDraft, AfterRoundsThatKeepEveryGuessTheGuessesAreTheReferenceHeads) {
  auto ck = Checkpoint::open(built().checkpoint);
  const ReferenceModel ref(*ck);
  auto model = Model::load(built().fp32, {.intra_op_threads = 1});
  Generator gen(*model, 1, 64);
  GenerationOptions o = test::speculative_options(13, SpeculativeMethod::Mtp, 3);
  o.speculative.accept_every_draft = true;
  const Ids prompt = {5, 17, 300, 42, 7, 99, 123, 256};
  const GenerationResult r = generate_rows(gen, std::vector<Ids>{prompt}, o, nullptr, {}).at(0);
  ASSERT_EQ(r.generated_ids.size(), 13u);  // t0, then three rounds of 3 guesses and the model's own token
  ASSERT_EQ(r.verify_runs, 3);
  const int64_t vocab = ck->config().vocab_size;
  for (size_t round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Ids context = prompt;  // the row's run tokens, then its chosen one
    context.insert(context.end(), r.generated_ids.begin(), r.generated_ids.begin() + 4 * round + 1);
    ReferenceState state = ref.new_state();
    ReferenceTrace trace;
    ref.forward(Ids(context.begin(), context.end() - 1), state, &trace);
    const Matrix64 hidden = ref.final_norm(trace.hidden.back());
    ReferenceMtpState ms = ref.new_mtp_state();
    Matrix64 head_hidden;
    const Matrix64 logits = ref.mtp_forward(Ids(context.begin() + 1, context.end()), hidden, ms);
    EXPECT_TRUE(is_argmax(logits.row(logits.rows - 1), vocab, r.generated_ids[4 * round + 1], 1e-3));
  }
}

// Whatever the head guesses (a synthetic head agrees with the synthetic
// model only by chance), the tokens are the plain loop's, fp32 and int4 on
// both kernel sets, a MoE model, batch rows and chunked prompts, greedy and sampled.
TEST(MtpDraft, TheLoopIsThePlainLoop) {
  const std::vector<Ids> feeds = {{5, 17, 300, 42, 7, 99, 123, 256}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}};
  struct Case {
    fs::path dir;
    KernelSet set;
    double tolerance;
  };
  // int4: a verify run's rows take the multi-row path (int8 activations
  // blocked differently): logits within 2e-2, the same tokens.
  for (const Case& c : {Case{built().fp32, KernelSet::Ort, 1e-4}, Case{built().int4, KernelSet::Deltagen, 2e-2},
                        Case{built().int4, KernelSet::Ort, 2e-2}, Case{built().moe_fp32, KernelSet::Deltagen, 1e-4}}) {
    RuntimeOptions ro{.intra_op_threads = 1};
    ro.kernels.set = c.set;
    auto model = Model::load(c.dir, ro);
    for (bool sampled : {false, true}) {
      SCOPED_TRACE(c.dir.filename().string() + " " + kernel_set_name(c.set) + (sampled ? " sampled" : " greedy"));
      GenerationOptions plain = test::speculative_options(20);
      if (sampled) {
        plain.sampling.temperature = 0.8;
        plain.sampling.seed = 7;
      }
      plain.prefill_chunk = 3;
      GenerationOptions spec = plain;
      spec.speculative.method = SpeculativeMethod::Mtp;
      Generator a(*model, 2, 64), b(*model, 2, 64);
      const auto want = generate_rows(a, feeds, plain, nullptr, {});
      const auto got = generate_rows(b, feeds, spec, nullptr, {});
      for (size_t r = 0; r < feeds.size(); ++r) {
        EXPECT_EQ(got[r].generated_ids, want[r].generated_ids) << "row " << r;
        EXPECT_GT(got[r].verify_runs, 0) << "row " << r;
        EXPECT_LE(got[r].drafted_tokens, 3 * got[r].verify_runs) << "row " << r;  // fewer where room ran out
      }
      EXPECT_EQ(b.state().tokens(0), a.state().tokens(0));
    }
  }
}

// serve --speculative mtp: sequences in rows that join, leave and move keep
// their own head cache; each gets what the server gives without guesses;
// /metrics counts the guesses.
TEST(MtpDraft, TheServerSpeculatesPerSequence) {
  auto engine = Engine::load(built().fp32, {.threads = 1});
  serve::SchedulerOptions so{.parallel = 2, .max_length = 64, .prefill_chunk = 5};
  serve::Scheduler plain(engine, so);
  so.speculative.method = SpeculativeMethod::Mtp;
  so.speculative.draft_tokens = 2;
  serve::Scheduler spec(engine, so);
  std::vector<std::shared_ptr<serve::SequenceStream>> a, b;
  for (int i = 0; i < 5; ++i) {
    GenerationOptions o;
    o.max_new_tokens = 6 + 5 * i;
    o.stop_at_eos = false;
    o.sampling.temperature = i % 2 ? 0.7 : 0.0;
    o.sampling.seed = uint64_t(i);
    const Ids prompt = {5 + i, 17, 300, 42 + i, 7, 99};
    a.push_back(plain.submit({prompt, {}, o}));
    b.push_back(spec.submit({prompt, {}, o}));
  }
  auto end_of = [](serve::SequenceStream& stream) {
    std::vector<serve::TokenEvent> events;
    for (;;)
      if (auto end = stream.wait(events, std::chrono::milliseconds(50))) return *end;
  };
  for (size_t i = 0; i < a.size(); ++i) {
    const serve::SequenceEnd want = end_of(*a[i]), got = end_of(*b[i]);
    EXPECT_EQ(got.generated_ids, want.generated_ids) << "sequence " << i;
    EXPECT_EQ(got.error, "");
  }
  const serve::SchedulerStats s = spec.stats();
  EXPECT_GT(s.verify_runs, 0);
  EXPECT_GT(s.drafted_tokens, 0);
  serve::Service service(engine, ChatTemplate::builtin(), spec, {"tiny"});
  const std::string metrics = service.metrics();
  EXPECT_NE(metrics.find("deltagen_speculative_drafted_tokens_total " + std::to_string(s.drafted_tokens)),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("# TYPE deltagen_speculative_accepted_tokens_total counter"), std::string::npos);

  // A server told to draft with a head the model does not have does not start.
  test::TempDir tmp;
  BuildOptions o;
  o.context_length = 256;
  o.show_progress = false;
  o.mtp = false;
  build_model(*Checkpoint::open(built().checkpoint), o, tmp / "no-head");
  test::expect_error([&] { serve::Scheduler(Engine::load(tmp / "no-head", {.threads = 1}), so); },
                     "has no multi-token-prediction head");
}

TEST(MtpDraft, AModelWithoutAHeadOrAHeadOfAnotherModelIsNamed) {
  test::TempDir tmp;
  auto ck = Checkpoint::open(built().checkpoint);
  BuildOptions o;
  o.context_length = 256;
  o.show_progress = false;
  o.mtp = false;
  build_model(*ck, o, tmp / "no-head");
  auto plain = Model::load(tmp / "no-head", {.intra_op_threads = 1});
  Generator gen(*plain, 1, 32);
  const GenerationOptions spec = test::speculative_options(4, SpeculativeMethod::Mtp, 2);
  test::expect_error([&] { generate_rows(gen, std::vector<Ids>{{1, 2, 3}}, spec, nullptr, {}); },
                     "has no multi-token-prediction head (mtp.onnx)");

  // A head built for a wider model, copied beside this one's decoder.
  auto wide = Checkpoint::open(write_checkpoint(tmp / "wide-ck", 2 * ck->config().hidden_size));
  o.mtp = true;
  build_model(*wide, o, tmp / "wide");
  build_model(*ck, o, tmp / "mixed");
  fs::copy_file(tmp / "wide" / "mtp.onnx", tmp / "mixed" / "mtp.onnx", fs::copy_options::overwrite_existing);
  if (fs::exists(tmp / "wide" / "mtp.onnx.data"))
    fs::copy_file(tmp / "wide" / "mtp.onnx.data", tmp / "mixed" / "mtp.onnx.data", fs::copy_options::overwrite_existing);
  auto mixed = Model::load(tmp / "mixed", {.intra_op_threads = 1});
  Generator gen2(*mixed, 1, 32);
  test::expect_error([&] { generate_rows(gen2, std::vector<Ids>{{1, 2, 3}}, spec, nullptr, {}); },
                     "mtp.onnx: the head reads hidden states " + std::to_string(2 * ck->config().hidden_size) +
                         " wide, the decoder writes " + std::to_string(ck->config().hidden_size));
}

// The raw bytes of an inline initializer of an ONNX file (the tiny models' weights).
std::string initializer_bytes(const fs::path& file, const std::string& name) {
  const onnx::ModelProto m = graph::load_model_proto(file);
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return t.raw_data();
  ADD_FAILURE() << file << " has no initializer " << name;
  return "";
}

// --mtp-draft-vocab N: the head's lm_head keeps the first N rows, so its
// guesses are the reference head's argmax over the first N ids (fp32), and
// in int4 its rows are the full head's first quantized rows, byte for byte
// (tied too, where the full head is the embedding's table); the loop's output
// is still the plain loop's; N beyond the vocabulary, or no head, is one line.
TEST(MtpDraft, ADraftVocabularyGuessesAmongItsFirstIdsAndTheOutputStaysExact) {
  test::TempDir tmp;
  ModelConfig tied_config = synth_preset("tiny");
  tied_config.tie_word_embeddings = true;
  tied_config.mtp_num_hidden_layers = 1;
  SynthOptions so;
  so.seed = 6;
  so.dtype = DType::F32;
  write_synthetic_checkpoint(tied_config, so, tmp / "tied-ck");
  auto ck = Checkpoint::open(built().checkpoint);
  const int64_t vocab = ck->config().vocab_size, draft_vocab = vocab / 4;
  BuildOptions o;
  o.context_length = 256;
  o.show_progress = false;
  struct Case {
    fs::path checkpoint;
    Precision precision;
    const char* name;
  };
  for (const Case& c : {Case{built().checkpoint, Precision::Fp32, "fp32"}, Case{tmp / "tied-ck", Precision::Fp32, "tied-fp32"},
                        Case{built().checkpoint, Precision::Int4, "int4"}, Case{tmp / "tied-ck", Precision::Int4, "tied-int4"}}) {
    SCOPED_TRACE(c.name);
    auto cc = Checkpoint::open(c.checkpoint);
    o.precision = c.precision;
    o.mtp_draft_vocab = draft_vocab;
    const fs::path dir = tmp / c.name;
    build_model(*cc, o, dir);
    std::ifstream config_file(dir / "genai_config.json");
    EXPECT_EQ(nlohmann::json::parse(config_file)["model"]["mtp"]["draft_vocab_size"], draft_vocab);
    auto model = Model::load(dir, {.intra_op_threads = 1});
    const Ids run = {5, 17, 300, 42, 7, 99, 123, 256};
    if (c.precision == Precision::Fp32) {
      Generator gen(*model, 1, 64);
      const size_t hidden_output = gen.fetch_output(MtpDrafter::kDecoderHidden);
      MtpDrafter drafter(*model, 1, 64);
      gen.run_row(0, run, false);
      drafter.observe(0, 0, static_cast<const std::byte*>(gen.fetched(hidden_output).GetTensorRawData()),
                      int64_t(run.size()));
      Ids context = run;
      context.push_back(11);
      const Ids guesses = drafter.draft(0, context, 1);
      ASSERT_EQ(guesses.size(), 1u);
      EXPECT_LT(guesses[0], draft_vocab);
      const ReferenceModel ref(*cc);
      ReferenceState state = ref.new_state();
      ReferenceTrace trace;
      ref.forward(run, state, &trace);
      ReferenceMtpState ms = ref.new_mtp_state();
      Matrix64 head_hidden;
      const Matrix64 logits =
          ref.mtp_forward(Ids(context.begin() + 1, context.end()), ref.final_norm(trace.hidden.back()), ms, &head_hidden);
      EXPECT_TRUE(is_argmax(logits.row(logits.rows - 1), draft_vocab, guesses[0], 1e-3));
    } else {
      o.mtp_draft_vocab = 0;
      build_model(*cc, o, tmp / (std::string(c.name) + "-full"));
      const fs::path full = tmp / (std::string(c.name) + "-full") / "mtp.onnx";
      for (const char* part : {"_Q4", "_scales"}) {
        const std::string all = initializer_bytes(full, std::string("lm_head.MatMul.weight") + part);
        const std::string kept = initializer_bytes(dir / "mtp.onnx", std::string("lm_head.MatMul.weight") + part + "_draft");
        EXPECT_EQ(kept.size() * size_t(vocab), all.size() * size_t(draft_vocab)) << part;
        EXPECT_EQ(kept, all.substr(0, kept.size())) << part;
      }
    }
    GenerationOptions plain = test::speculative_options(16);
    GenerationOptions spec = plain;
    spec.speculative.method = SpeculativeMethod::Mtp;
    Generator a(*model, 1, 64), b(*model, 1, 64);
    const std::vector<Ids> feeds = {run};
    const GenerationResult got = generate_rows(b, feeds, spec, nullptr, {}).at(0);
    EXPECT_EQ(got.generated_ids, generate_rows(a, feeds, plain, nullptr, {}).at(0).generated_ids);
    EXPECT_GT(got.verify_runs, 0);
  }
  o.precision = Precision::Fp32;
  o.mtp_draft_vocab = vocab + 1;
  test::expect_error([&] { build_model(*ck, o, tmp / "too-many"); }, "is more than the vocabulary's");
  EXPECT_FALSE(fs::exists(tmp / "too-many" / "model.onnx"));
  o.mtp_draft_vocab = 16;
  o.mtp = false;
  test::expect_error([&] { build_model(*ck, o, tmp / "no-head"); }, "builds no multi-token-prediction head");
}

TEST(MtpDraft, TheCliTakesItAndAModelWithoutAHeadIsOneLine) {
  const auto spec = test::run_cli({"generate", "--model", built().fp32.string(), "--ids", "5,17,300,42",
                                   "--max-new-tokens", "8", "--ignore-eos", "--json", "--speculative", "mtp",
                                   "--draft-tokens", "2"});
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  const auto plain = test::run_cli({"generate", "--model", built().fp32.string(), "--ids", "5,17,300,42",
                                    "--max-new-tokens", "8", "--ignore-eos", "--json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(spec.out);
  EXPECT_EQ(a.at("generated_ids"), b.at("generated_ids"));
  EXPECT_GT(b.at("verify_runs").get<int64_t>(), 0);

  const auto bad = test::run_cli({"generate", "--model", test::golden_model_dir().string(), "--ids", "1,2",
                                  "--speculative", "mtp"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("has no multi-token-prediction head"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

}  // namespace
}  // namespace deltagen
