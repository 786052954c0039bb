// The constrained token choice (runtime/sampling.h: choose_allowed and
// Sampler::next with a predicate): the unconstrained sampler still draws
// exactly what it drew before; greedy = argmax over the allowed ids; a
// sampled choice = the inverse CDF of filtered_distribution on the masked
// logits, for every u, whichever way (one by one, mask) the ids are tested;
// draws follow that distribution; few ids are tested when the best is allowed.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "deltagen/error.h"
#include "runtime/sampling.h"

namespace deltagen {
namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// Platform-independent logits in [-8, 8): mt19937 is fully specified.
std::vector<float> uniform_logits(std::mt19937& rng, int64_t n) {
  std::vector<float> logits(static_cast<size_t>(n));
  for (auto& l : logits) l = float(double(rng() >> 8) * (1.0 / 16777216.0) * 16.0 - 8.0);
  return logits;
}

// Digests of 300 unconstrained draws per (options, seed), written by the
// Sampler before the constrained choice existed (main at 101f3e2).
TEST(ConstrainedSampling, UnconstrainedDrawsAreBitIdenticalToBefore) {
  struct O {
    double t;
    int64_t k;
    double p, min_p, rep, presence, frequency;
  };
  const O grid[] = {{0, 0, 1, 0, 1, 0, 0},        {1, 0, 1, 0, 1, 0, 0},   {0.7, 40, 0.95, 0, 1, 0, 0},
                    {1.3, 0, 0.9, 0.05, 1, 0, 0}, {1, 5, 1, 0, 1.3, 0.5, 0.2}, {0.5, 0, 1, 0.1, 1, 0, 0},
                    {0, 0, 1, 0, 1.2, 0, 0.5},    {2, 100, 0.5, 0.02, 1, 0, 0}};
  const uint64_t expected[8][4] = {
      {0xe72ef8a35167059eull, 0xffa3b89ecffdbbdaull, 0xf03216e9eb18cf66ull, 0x1f17c9427a08edbeull},
      {0xb8e82ab23ce8b2e6ull, 0xd99de684d2cb8eebull, 0xf2a2960ece5434f4ull, 0xa3d864d5cf99363dull},
      {0xfcfcc819223c1487ull, 0x48d7649a5b12b38cull, 0xe0f5a86253305cb4ull, 0xfcfdf3bcd43a196aull},
      {0x70aaaf64df344cc6ull, 0xf7cd6b43463c7519ull, 0xb65763be6ce99a21ull, 0xd9cabe54e8171b50ull},
      {0x15b56970b464cc7cull, 0x57e5f8fceda74b31ull, 0x62e37e433eee5c11ull, 0xd57b67e799d9abfdull},
      {0x36d11085a5c3c61eull, 0x750f0a092475773eull, 0xa65544cbea54c5d9ull, 0x68d308780af55839ull},
      {0x9ef2dd5e392d7334ull, 0x7ab63136f223a62aull, 0x9e93c97bc5dd2739ull, 0xa2aa791639c43e9cull},
      {0x14997f8590f1d041ull, 0xa2b68f8143b3c243ull, 0xa158ab848c0f95ecull, 0xb47ed3272a20fb86ull}};
  const uint64_t seeds[] = {0, 1, 42, 123456789};
  for (int g = 0; g < 8; ++g) {
    for (int s = 0; s < 4; ++s) {
      SamplingOptions o;
      o.temperature = grid[g].t, o.top_k = grid[g].k, o.top_p = grid[g].p, o.min_p = grid[g].min_p;
      o.repetition_penalty = grid[g].rep, o.presence_penalty = grid[g].presence, o.frequency_penalty = grid[g].frequency;
      const int64_t vocab = 3001;
      Sampler sampler(o, vocab, seeds[s]);
      sampler.begin(std::vector<int64_t>{1, 2, 3, 2999});
      std::mt19937 rng(uint32_t(seeds[s]) + 7);
      uint64_t digest = 1469598103934665603ull;
      for (int step = 0; step < 300; ++step)
        digest = (digest ^ uint64_t(sampler.next(uniform_logits(rng, vocab).data()))) * 1099511628211ull;
      EXPECT_EQ(digest, expected[g][s]) << "options " << g << " seed " << seeds[s];
    }
  }
}

// A random mask: density d, at least one id allowed.
std::vector<uint8_t> random_mask(std::mt19937& rng, size_t n, double d) {
  std::vector<uint8_t> mask(n);
  for (auto& m : mask) m = double(rng()) / 4294967296.0 < d;
  mask[rng() % n] = 1;
  return mask;
}

// The oracle: the id at u in filtered_distribution of the masked logits (best first).
int64_t oracle(const std::vector<float>& logits, const std::vector<uint8_t>& mask, const SamplingOptions& o, double u,
               double* boundary_distance) {
  std::vector<float> masked = logits;
  for (size_t i = 0; i < masked.size(); ++i)
    if (!mask[i]) masked[i] = kMasked;
  const auto d = filtered_distribution(masked, o);
  double cumulative = 0;
  *boundary_distance = 1;
  for (const auto& t : d) {
    cumulative += t.probability;
    *boundary_distance = std::min(*boundary_distance, std::abs(cumulative - u));
    if (cumulative > u) return t.id;
  }
  return d.back().id;
}

TEST(ConstrainedSampling, GreedyIsArgmaxOverTheAllowedIds) {
  std::mt19937 rng(3);
  for (int round = 0; round < 300; ++round) {
    const int64_t n = 1 + rng() % 3000;
    auto logits = uniform_logits(rng, n);
    for (auto& l : logits)  // ties, exercised
      if (rng() % 4 == 0) l = std::round(l);
    const auto mask = random_mask(rng, size_t(n), std::vector<double>{0.0, 0.01, 0.5, 0.99, 1.0}[rng() % 5]);
    std::vector<float> masked = logits;
    for (size_t i = 0; i < masked.size(); ++i)
      if (!mask[i]) masked[i] = kMasked;
    const int64_t expected = argmax(masked.data(), n);
    ConstrainedScratch scratch;
    const TokenAllowed allowed = [&](int64_t id) { return mask[size_t(id)] != 0; };
    const TokenMaskFill fill = [&](std::span<uint8_t> m) { std::copy(mask.begin(), mask.end(), m.begin()); };
    for (size_t checks : {size_t(0), size_t(1), size_t(7), kChecksBeforeMask})
      for (const TokenMaskFill& f : {fill, TokenMaskFill()})
        EXPECT_EQ(choose_allowed(logits, SamplingOptions{}, 0.0, allowed, f, scratch, checks), expected)
            << "round " << round << " checks " << checks;
  }
}

TEST(ConstrainedSampling, ASampledChoiceIsTheInverseCdfOfTheMaskedDistribution) {
  std::mt19937 rng(11);
  int compared = 0;
  for (int round = 0; round < 400; ++round) {
    SamplingOptions o;
    o.temperature = std::vector<double>{0.05, 0.5, 1.0, 2.0}[rng() % 4];
    o.top_k = std::vector<int64_t>{0, 0, 2, 5, 50, 5000}[rng() % 6];
    o.top_p = std::vector<double>{1.0, 1.0, 0.95, 0.9, 0.5}[rng() % 5];
    o.min_p = std::vector<double>{0.0, 0.0, 0.05, 0.3}[rng() % 4];
    const int64_t n = 1 + rng() % 2000;
    auto logits = uniform_logits(rng, n);
    if (rng() % 3 == 0) logits[rng() % size_t(n)] += 12;  // a peaked distribution
    const auto mask = random_mask(rng, size_t(n), std::vector<double>{0.0, 0.02, 0.5, 0.95, 1.0}[rng() % 5]);
    ConstrainedScratch scratch;
    const TokenAllowed allowed = [&](int64_t id) { return mask[size_t(id)] != 0; };
    const TokenMaskFill fill = [&](std::span<uint8_t> m) { std::copy(mask.begin(), mask.end(), m.begin()); };
    for (int draw = 0; draw < 20; ++draw) {
      const double u = double(rng() >> 5) * 0x1.0p-27;
      double distance;
      const int64_t expected = oracle(logits, mask, o, u, &distance);
      if (distance < 1e-9) continue;  // rounding may differ right at a boundary
      for (size_t checks : {size_t(0), size_t(3), kChecksBeforeMask}) {
        EXPECT_EQ(choose_allowed(logits, o, u, allowed, checks == 3 ? TokenMaskFill() : fill, scratch, checks), expected)
            << "round " << round << " u " << u << " checks " << checks << " t " << o.temperature << " k " << o.top_k
            << " p " << o.top_p << " min_p " << o.min_p;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 20000);
}

TEST(ConstrainedSampling, DrawsFollowTheMaskedDistribution) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, 3.0f};
  const std::vector<uint8_t> mask = {1, 0, 1, 1, 1, 0};  // the favourite (5) and id 1 are not allowed
  SamplingOptions o;
  o.temperature = 1.0;
  o.top_p = 0.9;
  std::vector<float> masked = logits;
  for (size_t i = 0; i < masked.size(); ++i)
    if (!mask[i]) masked[i] = kMasked;
  std::map<int64_t, double> p;
  for (const auto& t : filtered_distribution(masked, o)) p[t.id] = t.probability;
  Sampler sampler(o, 6, 77);
  std::map<int64_t, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[sampler.next(logits.data(), [&](int64_t id) { return mask[size_t(id)] != 0; })];
  for (const auto& [id, c] : counts) EXPECT_TRUE(p.count(id)) << "drew " << id << ", outside the distribution";
  for (const auto& [id, q] : p) EXPECT_NEAR(counts[id] / double(n), q, 0.01) << id;
}

TEST(ConstrainedSampling, SameSeedSameTokensAndFewTestsWhenTheBestIsAllowed) {
  SamplingOptions o;
  o.temperature = 0.8;
  o.top_p = 0.95;
  const int64_t n = 20000;
  auto run = [&](uint64_t seed, int64_t* tests) {
    Sampler sampler(o, n, seed);
    std::mt19937 rng(5);
    std::vector<int64_t> out;
    for (int step = 0; step < 50; ++step) {
      auto logits = uniform_logits(rng, n);
      logits[size_t(step * 3)] = 30;  // a confident model, and its favourite is allowed
      out.push_back(sampler.next(logits.data(), [&](int64_t id) {
        ++*tests;
        return id % 3 != 1;
      }));
      EXPECT_NE(out.back() % 3, 1);
    }
    return out;
  };
  int64_t tests = 0, other = 0;
  EXPECT_EQ(run(9, &tests), run(9, &other));
  EXPECT_LT(tests, 50 * 4) << "a confident step should test about one id";
  Sampler greedy(SamplingOptions{}, 4, 0);
  int64_t greedy_tests = 0;
  const std::vector<float> l = {1, 5, 2, 3};
  EXPECT_EQ(greedy.next(l.data(), [&](int64_t) { return ++greedy_tests, true; }), 1);
  EXPECT_EQ(greedy_tests, 1);
}

TEST(ConstrainedSampling, PenaltiesApplyBeforeTheMask) {
  SamplingOptions o;
  o.frequency_penalty = 10;
  Sampler sampler(o, 4, 0);
  sampler.begin({});
  const std::vector<float> logits = {4, 3, 2, 1};
  const auto not_zero = [](int64_t id) { return id != 0; };
  EXPECT_EQ(sampler.next(logits.data(), not_zero), 1);
  EXPECT_EQ(sampler.next(logits.data(), not_zero), 2);  // 1 was penalized
  EXPECT_EQ(sampler.next(logits.data()), 0);
}

TEST(ConstrainedSampling, NothingAllowedIsAnError) {
  Sampler sampler(SamplingOptions{}, 10, 0);
  const std::vector<float> logits(10, 0.0f);
  EXPECT_THROW(sampler.next(logits.data(), [](int64_t) { return false; }), Error);
  SamplingOptions o;
  o.temperature = 1;
  Sampler sampled(o, 10, 0);
  EXPECT_THROW(sampled.next(logits.data(), [](int64_t) { return false; }), Error);
}

}  // namespace
}  // namespace deltagen
