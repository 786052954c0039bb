// Speculative decoding in the generation loop (runtime/generation.cpp,
// docs/speculative.md): a row's guesses are checked in one run and each stands
// only where the row's own sampler chooses it, so the output must be the
// plain loop's -- token for token in greedy, the same draws for a seed when
// sampling, and the exact target distribution (a chi-square test). The state
// a row keeps afterwards must be the one the plain loop leaves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "deltagen/error.h"
#include "models/build.h"
#include "runtime/generation.h"
#include "runtime/snapshot.h"
#include "runtime_fixtures.h"
#include "synth/synth.h"
#include "test_util.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;

GenerationOptions options(int64_t new_tokens, SpeculativeMethod method = SpeculativeMethod::None, int64_t k = 3) {
  return test::speculative_options(new_tokens, method, k);
}

std::vector<GenerationResult> run(Model& model, const std::vector<Ids>& feeds, const GenerationOptions& o,
                                  int64_t max_length = 96) {
  Generator gen(model, int64_t(feeds.size()), max_length);
  return generate_rows(gen, feeds, o, nullptr, {});
}

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Prompts that repeat themselves, so the n-gram drafter finds guesses: the
// golden prompt P, its greedy reply G, then P again (once the reply starts
// like G, the guess is the rest of G; the model, seeing more context, may or
// may not agree); P twice; and a short repeating pattern.
std::vector<Ids> repeating_prompts() {
  const Ids p = test::golden_prompt_ids(), g = test::golden_greedy_ids();
  return {concat({p, g, p}), concat({p, p}), Ids{7, 8, 9, 10, 7, 8, 9, 10, 7, 8}};
}

struct Totals {
  int64_t verify_runs = 0, drafted = 0, accepted = 0, replayed = 0;
  void add(const GenerationResult& r) {
    verify_runs += r.verify_runs;
    drafted += r.drafted_tokens;
    accepted += r.accepted_tokens;
    replayed += r.replayed_tokens;
  }
};

// Speculative vs plain on `model`: the same ids, and logits row for row within `tolerance`.
Totals expect_same_as_plain(Model& model, const std::vector<Ids>& prompts, double tolerance, int64_t new_tokens = 24) {
  Totals totals;
  for (const Ids& prompt : prompts) {
    const GenerationResult plain = run(model, {prompt}, options(new_tokens)).at(0);
    for (int64_t k : {1, 3, 8}) {
      SCOPED_TRACE("draft tokens " + std::to_string(k) + ", prompt of " + std::to_string(prompt.size()));
      const GenerationResult spec = run(model, {prompt}, options(new_tokens, SpeculativeMethod::Ngram, k)).at(0);
      EXPECT_EQ(spec.generated_ids, plain.generated_ids);
      EXPECT_EQ(spec.logits_rows, plain.logits_rows);
      if (spec.logits_rows == plain.logits_rows) EXPECT_LE(test::max_abs_diff(spec.logits, plain.logits), tolerance);
      EXPECT_EQ(spec.decode_steps, plain.decode_steps);  // tokens chosen after the prefill
      EXPECT_GT(spec.verify_runs, 0);                    // each prompt repeats itself: guesses were found (measured)
      EXPECT_LE(spec.accepted_tokens, spec.drafted_tokens);
      totals.add(spec);
    }
  }
  std::printf("[ measured ] %lld verify runs, %lld of %lld guesses kept, %lld tokens replayed\n",
              (long long)totals.verify_runs, (long long)totals.accepted, (long long)totals.drafted,
              (long long)totals.replayed);
  return totals;
}

// fp32 on ORT's kernels: the golden model. Both paths of a round are taken
// over these prompts (measured: guesses kept and missed), so the test says so.
TEST(SpeculativeGolden, GreedyIsThePlainLoopTokenForToken) {
  Model& model = test::golden_runtime_model();
  const Totals t = expect_same_as_plain(model, repeating_prompts(), 1e-4);
  EXPECT_GT(t.accepted, 0) << "no guess was kept: the accept path went untested";
  EXPECT_GT(t.replayed, 0) << "no guess was missed: the rollback went untested";
  // The golden prompt alone: whatever the drafter finds, the golden tokens.
  const GenerationResult r =
      run(model, {test::golden_prompt_ids()}, options(16, SpeculativeMethod::Ngram, 4)).at(0);
  EXPECT_EQ(r.generated_ids, test::golden_greedy_ids());
}

// A synthetic int4 model on deltagen's kernels (int8 activations): a verify
// run's rows take the multi-row matmul path, a plain step the one-row one.
const fs::path& int4_model_dir() {
  static test::TempDir dir;
  static const fs::path out = [] {
    ModelConfig c = synth_preset("tiny");
    SynthOptions so;
    so.seed = 11;
    write_synthetic_checkpoint(c, so, dir / "ck");
    BuildOptions o;
    o.precision = Precision::Int4;
    o.show_progress = false;
    build_model(*Checkpoint::open(dir / "ck"), o, dir / "int4");
    return dir / "int4";
  }();
  return out;
}

TEST(SpeculativeModel, Int4OnBothKernelSetsIsThePlainLoop) {
  for (KernelSet set : {KernelSet::Deltagen, KernelSet::Ort}) {
    SCOPED_TRACE(kernel_set_name(set));
    RuntimeOptions ro{.intra_op_threads = 1};
    ro.kernels.set = set;
    auto model = Model::load(int4_model_dir(), ro);
    // The logits differ a little (measured 0.007): a verify run's rows take
    // the multi-row path, whose int8 activations are blocked differently.
    // The tokens must not.
    expect_same_as_plain(*model, {Ids{7, 8, 9, 10, 7, 8, 9, 10, 7, 8}, Ids{3, 1, 4, 1, 5, 9, 2, 6, 3, 1, 4}}, 2e-2);
  }
}

// Rows of a batch speculate on their own: a row with guesses runs alone while
// the others step together; chunked prompts change nothing.
TEST(SpeculativeGolden, BatchRowsAndChunkedPromptsAreThePlainLoop) {
  Model& model = test::golden_runtime_model();
  std::vector<Ids> feeds = repeating_prompts();
  feeds.push_back(test::golden_prompt_ids());
  GenerationOptions plain = options(20), spec = options(20, SpeculativeMethod::Ngram, 3);
  plain.collect_logits = spec.collect_logits = false;
  plain.prefill_chunk = spec.prefill_chunk = 5;
  const auto want = run(model, feeds, plain), got = run(model, feeds, spec);
  int64_t verified = 0;
  for (size_t b = 0; b < feeds.size(); ++b) {
    EXPECT_EQ(got[b].generated_ids, want[b].generated_ids) << "row " << b;
    verified += got[b].verify_runs;
  }
  EXPECT_GT(verified, 0);
}

// What a row keeps after speculating (linear states, valid KV entries,
// tokens) is what the plain loop leaves, so a conversation's next turn
// continues exactly; the rollback is what makes this true.
TEST(SpeculativeGolden, TheStateAfterwardsIsThePlainLoops) {
  Model& model = test::golden_runtime_model();
  const Ids prompt = repeating_prompts().at(0);
  Generator plain(model, 1, 96), spec(model, 1, 96);
  GenerationOptions po = options(20), so = options(20, SpeculativeMethod::Ngram, 4);
  const GenerationResult a = generate_rows(plain, std::vector<Ids>{prompt}, po, nullptr, {}).at(0);
  const GenerationResult b = generate_rows(spec, std::vector<Ids>{prompt}, so, nullptr, {}).at(0);
  ASSERT_EQ(a.generated_ids, b.generated_ids);
  ASSERT_GT(b.replayed_tokens, 0);  // a guess was missed: the state was rolled back
  EXPECT_EQ(spec.state().tokens(0), plain.state().tokens(0));
  const HybridState& ps = plain.state();
  const HybridState& ss = spec.state();
  for (size_t c = 0; c < ps.io().caches.size(); ++c) {
    const auto x = ps.row_bytes(c, 0), y = ss.row_bytes(c, 0);
    ASSERT_EQ(x.size(), y.size());
    ASSERT_EQ(ps.io().caches[c].dtype, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
    const auto* fx = reinterpret_cast<const float*>(x.data());
    const auto* fy = reinterpret_cast<const float*>(y.data());
    const std::vector<int64_t> shape = ps.row_shape(c);
    double worst = 0;
    if (is_kv(ps.io().caches[c].kind)) {  // [1, heads, capacity, head_dim]: the valid positions only
      const int64_t valid = ps.length(0);
      for (int64_t h = 0; h < shape[1]; ++h)
        for (int64_t p = 0; p < valid; ++p)
          for (int64_t d = 0; d < shape[3]; ++d) {
            const size_t i = size_t((h * shape[2] + p) * shape[3] + d);
            worst = std::max(worst, double(std::fabs(fx[i] - fy[i])));
          }
    } else {
      for (size_t i = 0; i < x.size() / sizeof(float); ++i) worst = std::max(worst, double(std::fabs(fx[i] - fy[i])));
    }
    EXPECT_LE(worst, 1e-5) << ps.io().caches[c].input_name;
  }
  // The next turn: the last reply token and a new prompt, on both.
  Ids next = {a.generated_ids.back(), 5, 17, 300 % test::kGoldenVocab};
  const GenerationResult a2 = generate_rows(plain, std::vector<Ids>{next}, po, nullptr, {}).at(0);
  const GenerationResult b2 = generate_rows(spec, std::vector<Ids>{next}, so, nullptr, {}).at(0);
  EXPECT_EQ(a2.generated_ids, b2.generated_ids);
}

// A state saved and restored (snapshot bytes, as a --save-state file or the
// prompt cache holds them) speculates into the plain loop's tokens.
TEST(SpeculativeGolden, AfterASnapshotRestoreIsThePlainLoop) {
  Model& model = test::golden_runtime_model();
  const Ids p = test::golden_prompt_ids();
  Generator plain(model, 1, 96), restored(model, 1, 96);
  const GenerationResult first = generate_rows(plain, std::vector<Ids>{concat({p, p})}, options(1), nullptr, {}).at(0);
  const Ids pending = first.generated_ids;
  const StateSnapshot saved =
      parse_snapshot(serialize_snapshot(capture_row(plain.state(), 0, model.vocab_size(), pending)), "test");
  restore_row(restored.state(), 0, model.vocab_size(), saved);
  ASSERT_EQ(restored.state().tokens(0), plain.state().tokens(0));
  const Ids next = concat({pending, p});  // the pending token, then the prompt once more
  const GenerationResult want = generate_rows(plain, std::vector<Ids>{next}, options(20), nullptr, {}).at(0);
  const GenerationResult got =
      generate_rows(restored, std::vector<Ids>{next}, options(20, SpeculativeMethod::Ngram, 3), nullptr, {}).at(0);
  EXPECT_EQ(got.generated_ids, want.generated_ids);
  EXPECT_LE(test::max_abs_diff(got.logits, want.logits), 1e-4);
  EXPECT_GT(got.verify_runs, 0);
}

// With accept_every_draft (the bench's ceiling) every guess stands: a round
// of k guesses chooses k + 1 tokens in one run and replays nothing.
TEST(SpeculativeGolden, AcceptingEveryGuessTakesOneRunPerRound) {
  Model& model = test::golden_runtime_model();
  GenerationOptions o = options(13, SpeculativeMethod::Ngram, 3);
  o.speculative.accept_every_draft = true;
  const GenerationResult r = run(model, {Ids{7, 8, 9, 10, 7, 8, 9, 10, 7, 8}}, o).at(0);
  ASSERT_EQ(r.generated_ids.size(), 13u);
  EXPECT_EQ(r.replayed_tokens, 0);
  EXPECT_EQ(r.accepted_tokens, r.drafted_tokens);
  EXPECT_GT(r.verify_runs, 0);
  // Every token after the first came from a plain step (one each) or a round (1 + its guesses).
  EXPECT_EQ(r.decode_steps, 12);
  EXPECT_LE(r.verify_runs + r.drafted_tokens, r.decode_steps);
}

// Sampling: the same seed draws the same tokens with and without guesses
// (each draw is made from the same logits in the same order). A low
// temperature keeps the replies close to the prompt's repeats, so guesses are
// found; presence penalty exercises the sampler's history.
TEST(SpeculativeGolden, SampledTokensAreThePlainLoopsForEachSeed) {
  Model& model = test::golden_runtime_model();
  int64_t verified = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    GenerationOptions plain = options(16), spec = options(16, SpeculativeMethod::Ngram, 3);
    for (GenerationOptions* o : {&plain, &spec}) {
      o->collect_logits = false;
      o->sampling.temperature = 0.3;
      o->sampling.top_p = 0.95;
      o->sampling.presence_penalty = 0.1;
      o->sampling.seed = seed;
    }
    const Ids prompt = repeating_prompts().at(0);
    const GenerationResult a = run(model, {prompt}, plain).at(0), b = run(model, {prompt}, spec).at(0);
    EXPECT_EQ(a.generated_ids, b.generated_ids) << "seed " << seed;
    verified += b.verify_runs;
  }
  EXPECT_GT(verified, 0);
}

// The chi-square quantile of `df` degrees of freedom at upper tail `z`
// standard deviations (Wilson-Hilferty; within 1% for df >= 3).
double chi_square_quantile(double df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// The first three tokens sampled with guesses (temperature 1, top-k 3: at most
// 27 outcomes) over many seeds, against the exact probabilities computed from
// the model's own logits. The guesses come from a drafter of the test's own
// (SpeculativeOptions::drafter): the model's most likely next two tokens after
// the first, so they are kept about as often as the target's top token is
// drawn, and missed otherwise. False-alarm rate 1e-4 (z = 3.719); bins
// expected below 5 are pooled.
TEST(SpeculativeSampling, TheFirstTokensFollowTheModelsDistribution) {
  Model& model = test::golden_runtime_model();
  const Ids prompt = repeating_prompts().at(2);
  const int64_t P = int64_t(prompt.size());
  constexpr double kTemperature = 1.0;
  constexpr int64_t kTopK = 3, kSeeds = 3000;
  Generator probe(model, 1, 64);
  auto probabilities = [&](const Ids& context, int64_t* best) {  // top-k of softmax(logits / T), renormalized
    probe.reset();
    const Logits l = probe.forward(context, false);
    std::vector<int64_t> ids(size_t(l.vocab));
    std::iota(ids.begin(), ids.end(), 0);
    const float* row = l.row(0, 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int64_t x, int64_t y) { return row[x] > row[y]; });
    std::map<int64_t, double> p;
    double sum = 0;
    for (int64_t i = 0; i < kTopK; ++i) sum += p[ids[size_t(i)]] = std::exp((row[ids[size_t(i)]] - row[ids[0]]) / kTemperature);
    for (auto& [id, q] : p) q /= sum;
    *best = ids[0];
    return p;
  };
  std::map<Ids, double> expected;  // (t1, t2, t3) -> probability
  std::map<int64_t, Ids> guesses;  // t1 -> the likeliest t2, then the likeliest t3 after it
  int64_t best = 0;
  for (const auto& [t1, p1] : probabilities(prompt, &best)) {
    for (const auto& [t2, p2] : probabilities(concat({prompt, {t1}}), &best)) {
      int64_t unused = 0;
      for (const auto& [t3, p3] : probabilities(concat({prompt, {t1, t2}}), &unused)) expected[{t1, t2, t3}] = p1 * p2 * p3;
    }
    probabilities(concat({prompt, {t1}}), &best);
    const int64_t g2 = best;
    probabilities(concat({prompt, {t1, g2}}), &best);
    guesses[t1] = {g2, best};
  }

  std::map<Ids, int64_t> seen;
  int64_t kept = 0, missed = 0;
  Generator gen(model, 1, 64);
  GenerationOptions o = options(3);
  o.collect_logits = false;
  o.sampling.temperature = kTemperature;
  o.sampling.top_k = kTopK;
  o.speculative.draft_tokens = 2;
  o.speculative.drafter = [&](std::span<const int64_t> context, int64_t k) -> Ids {
    if (int64_t(context.size()) != P + 1 || !guesses.count(context.back())) return {};
    Ids g = guesses.at(context.back());
    g.resize(size_t(std::min<int64_t>(k, 2)));
    return g;
  };
  for (int64_t seed = 0; seed < kSeeds; ++seed) {
    o.sampling.seed = uint64_t(seed);
    gen.reset();
    const GenerationResult r = generate_rows(gen, std::vector<Ids>{prompt}, o, nullptr, {}).at(0);
    ++seen[r.generated_ids];
    kept += r.accepted_tokens > 0;
    missed += r.drafted_tokens > r.accepted_tokens;
  }
  double chi2 = 0, pooled_expected = 0, pooled_seen = 0;
  int64_t bins = 0, outside = 0;
  for (const auto& [ids, count] : seen) outside += expected.count(ids) ? 0 : count;
  EXPECT_EQ(outside, 0) << "tokens outside the top-k were sampled";
  for (const auto& [ids, p] : expected) {
    const double e = p * double(kSeeds), n = double(seen.count(ids) ? seen.at(ids) : 0);
    if (e < 5) {
      pooled_expected += e;
      pooled_seen += n;
      continue;
    }
    chi2 += (n - e) * (n - e) / e;
    ++bins;
  }
  if (pooled_expected > 0) {
    chi2 += (pooled_seen - pooled_expected) * (pooled_seen - pooled_expected) / pooled_expected;
    ++bins;
  }
  const double limit = chi_square_quantile(double(bins - 1), 3.719);
  std::printf("[ measured ] %lld seeds, %lld bins: chi-square %.2f (limit %.2f at 1e-4); runs with a kept guess %lld, "
              "with a missed one %lld\n",
              (long long)kSeeds, (long long)bins, chi2, limit, (long long)kept, (long long)missed);
  ASSERT_GE(bins, 4);
  EXPECT_LT(chi2, limit);
  // The test means something only if guesses were both kept and missed often.
  EXPECT_GT(kept, kSeeds / 10);
  EXPECT_GT(missed, kSeeds / 10);
}

TEST(SpeculativeOptions, BadValuesAreOneLineErrors) {
  Model& model = test::golden_runtime_model();
  for (int64_t k : {int64_t(0), int64_t(9), int64_t(-1)}) {
    GenerationOptions o = options(4, SpeculativeMethod::Ngram, k);
    test::expect_error([&] { run(model, {Ids{1, 2, 3}}, o); }, "--draft-tokens: must be between 1 and 8");
  }
  test::expect_error([] { parse_speculative_method("medusa"); }, "--speculative: expected none, ngram or mtp, not 'medusa'");
  EXPECT_EQ(parse_speculative_method("ngram"), SpeculativeMethod::Ngram);
}

TEST(SpeculativeCli, GenerateTakesTheFlagsAndReportsTheRounds) {
  const fs::path model = test::golden_model_dir();
  const auto plain = test::run_cli({"generate", "--model", model.string(), "--ids", "7,8,9,10,7,8,9,10,7,8",
                                    "--max-new-tokens", "12", "--ignore-eos", "--json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto spec = test::run_cli({"generate", "--model", model.string(), "--ids", "7,8,9,10,7,8,9,10,7,8",
                                   "--max-new-tokens", "12", "--ignore-eos", "--json", "--speculative", "ngram",
                                   "--draft-tokens", "4"});
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  const auto a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(spec.out);
  EXPECT_EQ(a.at("generated_ids"), b.at("generated_ids"));
  EXPECT_GT(b.at("verify_runs").get<int64_t>(), 0);
  EXPECT_FALSE(a.contains("verify_runs"));
  const auto bad = test::run_cli({"generate", "--model", model.string(), "--ids", "1,2", "--draft-tokens", "9"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--draft-tokens: must be between 1 and 8, not 9"), std::string::npos) << bad.err;
  const auto method = test::run_cli({"generate", "--model", model.string(), "--ids", "1,2", "--speculative", "x"});
  EXPECT_NE(method.exit_code, 0);
  EXPECT_NE(method.err.find("--speculative: expected none, ngram or mtp, not 'x'"), std::string::npos) << method.err;
}

}  // namespace
}  // namespace deltagen
