// The token chooser on handmade logits: greedy, the filters (top-k, top-p,
// min-p), temperature, penalties, seeded determinism and bad settings.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "runtime/sampling.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

// Logits whose softmax (temperature 1) is exactly `probabilities`.
std::vector<float> logits_of(const std::vector<double>& probabilities) {
  std::vector<float> logits;
  for (double p : probabilities) logits.push_back(float(std::log(p)));
  return logits;
}

std::vector<float> random_logits(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(n));
  for (float& l : logits) l = normal(rng);
  return logits;
}

std::vector<int64_t> ids_of(const std::vector<TokenProbability>& d) {
  std::vector<int64_t> ids;
  for (const auto& t : d) ids.push_back(t.id);
  return ids;
}

SamplingOptions with_temperature(double temperature = 1.0) {
  SamplingOptions o;
  o.temperature = temperature;
  return o;
}

TEST(Sampling, GreedyTakesTheFirstLargestLogit) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  Sampler sampler(SamplingOptions{}, 4, 0);
  EXPECT_EQ(sampler.next(logits.data()), 1);
  EXPECT_EQ(argmax(logits.data(), 4), 1);
}

// argmax works in blocks of 1024 with 16 running maxima: every position
// (lane, block edge, tail), ties across blocks, NaN and -inf, against a scan.
TEST(Sampling, ArgmaxMatchesAScanAtEveryPosition) {
  auto scan = [](const std::vector<float>& v) {
    int64_t best = 0;
    for (int64_t i = 1; i < int64_t(v.size()); ++i)
      if (v[size_t(i)] > v[size_t(best)]) best = i;
    return best;
  };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  for (int64_t n : {1, 15, 16, 17, 1023, 1024, 1025, 3000}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = dist(rng);
    for (int64_t at : {int64_t(0), n / 2, n - 1, std::min<int64_t>(n - 1, 1024), std::min<int64_t>(n - 1, 1039)}) {
      std::vector<float> w = v;
      w[size_t(at)] = 50.0f;
      EXPECT_EQ(argmax(w.data(), n), at) << "n " << n << " at " << at;
      if (at + 1 < n) {  // a tie later, in the same or another block: the first wins
        w[size_t(n - 1)] = 50.0f;
        EXPECT_EQ(argmax(w.data(), n), scan(w)) << "tie, n " << n << " at " << at;
      }
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> odd(2100, -inf);
  EXPECT_EQ(argmax(odd.data(), 2100), 0);  // all -inf: the first
  odd[7] = nan;
  odd[1500] = -3.0f;
  EXPECT_EQ(argmax(odd.data(), 2100), 1500);  // NaN never wins
  odd[0] = nan;
  EXPECT_EQ(argmax(odd.data(), 2100), scan(odd));  // NaN first: nothing compares greater
}

TEST(Sampling, TopK1IsGreedy) {
  SamplingOptions o = with_temperature(1.5);
  o.top_k = 1;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto logits = random_logits(1000, seed);
    Sampler sampler(o, 1000, seed);
    EXPECT_EQ(sampler.next(logits.data()), argmax(logits.data(), 1000)) << "seed " << seed;
  }
}

TEST(Sampling, TemperatureTowardZeroIsGreedy) {
  for (double t : {1e-3, 1e-6, 1e-12}) {
    for (uint32_t seed = 0; seed < 20; ++seed) {
      const auto logits = random_logits(1000, seed);
      Sampler sampler(with_temperature(t), 1000, seed);
      EXPECT_EQ(sampler.next(logits.data()), argmax(logits.data(), 1000)) << "temperature " << t << " seed " << seed;
    }
  }
  EXPECT_TRUE(with_temperature(0.0).greedy());
}

TEST(Sampling, SameSeedSameTokensOtherSeedOtherTokens) {
  SamplingOptions o = with_temperature(1.0);
  o.top_p = 0.95;
  auto draw = [&](uint64_t seed) {
    Sampler sampler(o, 300, seed);
    std::vector<int64_t> tokens;
    for (uint32_t step = 0; step < 200; ++step) tokens.push_back(sampler.next(random_logits(300, step).data()));
    return tokens;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
}

TEST(Sampling, DrawsFollowTheDistribution) {
  const auto logits = logits_of({0.5, 0.3, 0.2});
  Sampler sampler(with_temperature(1.0), 3, 123);
  std::map<int64_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[sampler.next(logits.data())];
  EXPECT_NEAR(counts[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(counts[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(counts[2] / double(n), 0.2, 0.02);
}

TEST(Sampling, TopPKeepsTheSmallestPrefixReachingP) {
  const auto logits = logits_of({0.05, 0.5, 0.15, 0.3});  // best first: 1, 3, 2, 0
  SamplingOptions o = with_temperature(1.0);
  o.top_p = 0.75;
  auto d = filtered_distribution(logits, o);
  EXPECT_EQ(ids_of(d), (std::vector<int64_t>{1, 3}));
  EXPECT_NEAR(d[0].probability, 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(d[1].probability, 0.3 / 0.8, 1e-6);

  o.top_p = 0.85;
  EXPECT_EQ(ids_of(filtered_distribution(logits, o)), (std::vector<int64_t>{1, 3, 2}));
  o.top_p = 0.4;  // the best token alone already reaches it
  EXPECT_EQ(ids_of(filtered_distribution(logits, o)), (std::vector<int64_t>{1}));
  o.top_p = 1.0;
  EXPECT_EQ(ids_of(filtered_distribution(logits, o)), (std::vector<int64_t>{1, 3, 2, 0}));
}

TEST(Sampling, TopPOverALargeVocabularySortsOnlyWhatItNeeds) {
  // 5000 tokens: one at 0.5, the rest sharing 0.5 evenly; top-p 0.6 needs the
  // best one and 1000 of the others (beyond the first sorted chunk of 64).
  std::vector<double> p(5000, 0.5 / 4999);
  p[4321] = 0.5;
  SamplingOptions o = with_temperature(1.0);
  o.top_p = 0.6;
  auto d = filtered_distribution(logits_of(p), o);
  EXPECT_EQ(d.front().id, 4321);
  EXPECT_NEAR(double(d.size()), 1 + 0.1 / (0.5 / 4999), 2);
}

TEST(Sampling, MinPDropsTokensBelowAFractionOfTheBest) {
  const auto logits = logits_of({0.05, 0.5, 0.15, 0.3});
  SamplingOptions o = with_temperature(1.0);
  o.min_p = 0.2;  // threshold 0.1
  EXPECT_EQ(ids_of(filtered_distribution(logits, o)), (std::vector<int64_t>{1, 3, 2}));
  o.min_p = 0.5;  // threshold 0.25
  auto d = filtered_distribution(logits, o);
  EXPECT_EQ(ids_of(d), (std::vector<int64_t>{1, 3}));
  EXPECT_NEAR(d[0].probability, 0.5 / 0.8, 1e-6);
}

TEST(Sampling, TopKThenTopPRenormalizes) {
  const auto logits = logits_of({0.05, 0.5, 0.15, 0.3});
  SamplingOptions o = with_temperature(1.0);
  o.top_k = 3;    // 0.5, 0.3, 0.15 -> 0.526, 0.316, 0.158
  o.top_p = 0.8;  // 0.526 + 0.316 = 0.842 >= 0.8
  EXPECT_EQ(ids_of(filtered_distribution(logits, o)), (std::vector<int64_t>{1, 3}));
  o.top_k = 2;
  o.top_p = 1.0;
  EXPECT_EQ(ids_of(filtered_distribution(logits, o)), (std::vector<int64_t>{1, 3}));
}

TEST(Sampling, TemperatureSharpensAndFlattens) {
  const auto logits = logits_of({0.6, 0.4});
  auto best = [&](double t) { return filtered_distribution(logits, with_temperature(t))[0].probability; };
  EXPECT_NEAR(best(1.0), 0.6, 1e-6);
  EXPECT_GT(best(0.5), 0.6);
  EXPECT_LT(best(2.0), 0.6);
  EXPECT_NEAR(best(0.5), 0.36 / (0.36 + 0.16), 1e-6);  // p^(1/t), renormalized
}

TEST(Sampling, SamplerNeverDrawsAFilteredToken) {
  const auto logits = logits_of({0.05, 0.5, 0.15, 0.3});
  SamplingOptions o = with_temperature(1.0);
  o.top_p = 0.75;
  Sampler sampler(o, 4, 99);
  for (int i = 0; i < 2000; ++i) {
    const int64_t t = sampler.next(logits.data());
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 3.0f};
  SamplingOptions o;
  o.repetition_penalty = 2.0;
  apply_penalties(logits, std::vector<int64_t>{0, 1, 0}, {}, o);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, -4.0f, 1.0f, 3.0f}));
}

TEST(Sampling, PresenceAndFrequencyPenaltiesCountGeneratedTokensOnly) {
  std::vector<float> logits = {2.0f, 2.0f, 2.0f};
  SamplingOptions o;
  o.presence_penalty = 0.5;
  o.frequency_penalty = 0.25;
  // Token 0 only in the prompt: untouched; token 2 generated twice.
  apply_penalties(logits, std::vector<int64_t>{0}, std::vector<int64_t>{2, 1, 2}, o);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);
  EXPECT_FLOAT_EQ(logits[1], 2.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(logits[2], 2.0f - 0.5f - 0.5f);
}

TEST(Sampling, GreedySamplerAppliesPenaltiesAsTokensAreGenerated) {
  // Token 0 is best until it has been generated; the frequency penalty then
  // pushes it below token 1, and so on.
  const std::vector<float> logits = {3.0f, 2.5f, 0.0f};
  SamplingOptions o;
  o.frequency_penalty = 1.0;
  Sampler sampler(o, 3, 0);
  sampler.begin({});
  EXPECT_EQ(sampler.next(logits.data()), 0);  // 3.0 vs 2.5
  EXPECT_EQ(sampler.next(logits.data()), 1);  // 2.0 vs 2.5
  EXPECT_EQ(sampler.next(logits.data()), 0);  // 2.0 vs 1.5

  // The repetition penalty counts the context given to begin().
  SamplingOptions r;
  r.repetition_penalty = 2.0;
  Sampler with_context(r, 3, 0);
  with_context.begin(std::vector<int64_t>{0});
  EXPECT_EQ(with_context.next(logits.data()), 1);  // 1.5 vs 2.5
  with_context.begin({});                          // a new request forgets the counts
  EXPECT_EQ(with_context.next(logits.data()), 0);
}

TEST(Sampling, SettingsOutOfRangeAreClearErrors) {
  auto bad = [](auto set) {
    SamplingOptions o;
    set(o);
    return o;
  };
  const std::vector<SamplingOptions> cases = {
      bad([](SamplingOptions& o) { o.temperature = -1; }),
      bad([](SamplingOptions& o) { o.temperature = NAN; }),
      bad([](SamplingOptions& o) { o.top_k = -1; }),
      bad([](SamplingOptions& o) { o.top_p = 0; }),
      bad([](SamplingOptions& o) { o.top_p = 1.5; }),
      bad([](SamplingOptions& o) { o.min_p = -0.1; }),
      bad([](SamplingOptions& o) { o.min_p = 2; }),
      bad([](SamplingOptions& o) { o.repetition_penalty = 0; }),
      bad([](SamplingOptions& o) { o.presence_penalty = INFINITY; }),
  };
  for (const auto& o : cases) {
    try {
      validate_sampling(o);
      ADD_FAILURE() << "accepted a bad setting";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("sampling: ", 0), 0u) << e.what();
    }
    EXPECT_THROW(Sampler(o, 10, 0), Error);
  }
  Sampler sampler(SamplingOptions{}, 10, 0);
  EXPECT_THROW(sampler.begin(std::vector<int64_t>{10}), Error);
}

}  // namespace
}  // namespace deltagen
