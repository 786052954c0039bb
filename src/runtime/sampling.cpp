#include "runtime/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "deltagen/error.h"

namespace deltagen {
namespace {

// Best first: the higher logit, then the lower id (a fixed order for ties).
bool better(const Candidate& a, const Candidate& b) { return ranks_before(a, b); }

void check(bool ok, const std::string& what) {
  if (!ok) fail("sampling", what);
}

// Keeps the top_k best of candidates [0, n); returns the new count.
size_t keep_top_k(std::vector<Candidate>& c, size_t n, int64_t top_k) {
  if (top_k <= 0 || size_t(top_k) >= n) return n;
  std::nth_element(c.begin(), c.begin() + top_k, c.begin() + ptrdiff_t(n), better);
  return size_t(top_k);
}

// Keeps the smallest best-first prefix of [0, n) whose weight reaches top_p of
// the total, sorting only as much of the list as that prefix needs (the
// vocabulary can be 250k entries; the prefix is usually short).
size_t keep_top_p(std::vector<Candidate>& c, size_t n, double top_p) {
  if (top_p >= 1.0) return n;
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += c[i].weight;
  const double target = top_p * total;
  double cumulative = 0;
  size_t sorted = 0;
  while (sorted < n) {
    const size_t upto = std::min(n, std::max<size_t>(64, sorted * 2));
    std::partial_sort(c.begin() + ptrdiff_t(sorted), c.begin() + ptrdiff_t(upto), c.begin() + ptrdiff_t(n), better);
    for (size_t i = sorted; i < upto; ++i) {
      cumulative += c[i].weight;
      if (cumulative >= target) return i + 1;
    }
    sorted = upto;
  }
  return n;
}

// Drops candidates below min_p times the best weight (the best one has
// weight 1: weights are relative to the largest logit, which always survives).
size_t keep_min_p(std::vector<Candidate>& c, size_t n, double min_p) {
  if (min_p <= 0.0) return n;
  double best = 0;
  for (size_t i = 0; i < n; ++i) best = std::max(best, c[i].weight);
  const double threshold = min_p * best;
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i)
    if (c[i].weight >= threshold) c[kept++] = c[i];
  return kept;
}

// Fills `c` with every token's logit and weight; returns the number kept
// after top-k, top-p and min-p.
size_t filter(std::span<const float> logits, const SamplingOptions& o, std::vector<Candidate>& c) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  const double inverse_temperature = 1.0 / o.temperature;
  c.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    c[i] = {int64_t(i), logits[i], std::exp(double(logits[i] - max_logit) * inverse_temperature)};
  size_t n = keep_top_k(c, c.size(), o.top_k);
  n = keep_top_p(c, n, o.top_p);
  return keep_min_p(c, n, o.min_p);
}

// One seen token's logit: divided (positive) or multiplied (negative) by the
// repetition penalty, then lowered by presence + frequency * times generated.
void penalize_one(float& logit, int32_t generated_count, const SamplingOptions& o) {
  if (o.repetition_penalty != 1.0)
    logit = logit > 0 ? float(logit / o.repetition_penalty) : float(logit * o.repetition_penalty);
  if (generated_count > 0) logit -= float(o.presence_penalty + o.frequency_penalty * generated_count);
}

}  // namespace

void validate_sampling(const SamplingOptions& o) {
  check(std::isfinite(o.temperature) && o.temperature >= 0, "temperature must be a number >= 0 (0 = greedy)");
  check(o.top_k >= 0, "top-k must be >= 0 (0 = off)");
  check(o.top_p > 0 && o.top_p <= 1, "top-p must be in (0, 1] (1 = off)");
  check(o.min_p >= 0 && o.min_p <= 1, "min-p must be in [0, 1] (0 = off)");
  check(std::isfinite(o.repetition_penalty) && o.repetition_penalty > 0, "repetition penalty must be > 0 (1 = off)");
  check(std::isfinite(o.presence_penalty), "presence penalty must be a finite number (0 = off)");
  check(std::isfinite(o.frequency_penalty), "frequency penalty must be a finite number (0 = off)");
}

int64_t argmax(const float* row, int64_t n) {
  // Once per decode step over ~250K logits (1 MB): a scalar scan that
  // re-reads the running best costs ~0.2 ms, a few percent of a 0.8B step.
  // 16 running maxima per block of 1024 in MAXPS (x > m ? x : m is its exact
  // semantics, so NaNs never win; GCC leaves the plain loop scalar), reading
  // ahead: the logits were just written by the lm_head's threads and come
  // from L3 or DRAM. Then one block is scanned for the first index holding
  // the maximum. (0.8B decode: 0.22 -> 0.1 ms.)
  constexpr int64_t kBlock = 1024, kLanes = 16;
  if (n <= 0) return 0;
  float best = row[0];
  int64_t best_block = 0;
  for (int64_t b0 = 0; b0 < n; b0 += kBlock) {
    const int64_t end = std::min(n, b0 + kBlock);
    alignas(16) float lane[kLanes];
    int64_t i = b0;
#if defined(__SSE2__)
    __m128 acc[kLanes / 4];
    for (auto& a : acc) a = _mm_set1_ps(-std::numeric_limits<float>::infinity());
    for (; i + kLanes <= end; i += kLanes) {
      _mm_prefetch(reinterpret_cast<const char*>(row + i) + 4096, _MM_HINT_T0);
      for (int64_t j = 0; j < kLanes / 4; ++j) acc[j] = _mm_max_ps(_mm_loadu_ps(row + i + 4 * j), acc[j]);
    }
    for (int64_t j = 0; j < kLanes / 4; ++j) _mm_store_ps(lane + 4 * j, acc[j]);
#else
    for (float& l : lane) l = -std::numeric_limits<float>::infinity();
    for (; i + kLanes <= end; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) lane[j] = row[i + j] > lane[j] ? row[i + j] : lane[j];
#endif
    for (; i < end; ++i) lane[0] = row[i] > lane[0] ? row[i] : lane[0];
    float m = lane[0];
    for (int64_t j = 1; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
    if (m > best) {  // strictly: an equal maximum in a later block loses
      best = m;
      best_block = b0;
    }
  }
  const int64_t end = std::min(n, best_block + kBlock);
  for (int64_t i = best_block; i < end; ++i)
    if (row[i] == best) return i;
  return best_block;  // row[0] is NaN: nothing compares greater, like std::max_element
}

std::vector<TokenProbability> filtered_distribution(std::span<const float> logits, const SamplingOptions& options) {
  validate_sampling(options);
  if (logits.empty()) fail("sampling", "no logits");
  if (options.greedy()) return {{argmax(logits.data(), int64_t(logits.size())), 1.0}};
  std::vector<Candidate> c;
  const size_t n = filter(logits, options, c);
  std::sort(c.begin(), c.begin() + ptrdiff_t(n), better);
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += c[i].weight;
  std::vector<TokenProbability> out;
  for (size_t i = 0; i < n; ++i)
    if (c[i].weight > 0) out.push_back({c[i].id, c[i].weight / total});
  return out;
}

void apply_penalties(std::span<float> logits, std::span<const int64_t> context, std::span<const int64_t> generated,
                     const SamplingOptions& options) {
  std::vector<uint8_t> seen(logits.size(), 0);
  std::vector<int32_t> counts(logits.size(), 0);
  auto index = [&](int64_t id) {
    if (id < 0 || id >= int64_t(logits.size())) fail("sampling", "token id " + std::to_string(id) + " is outside the vocabulary");
    return size_t(id);
  };
  for (int64_t id : context) seen[index(id)] = 1;
  for (int64_t id : generated) {
    seen[index(id)] = 1;
    ++counts[index(id)];
  }
  for (size_t id = 0; id < logits.size(); ++id)
    if (seen[id]) penalize_one(logits[id], counts[id], options);
}

Sampler::Sampler(const SamplingOptions& options, int64_t vocab, uint64_t seed)
    : options_(options), vocab_(vocab), rng_(seed) {
  validate_sampling(options);
  if (vocab < 1) fail("sampling", "the vocabulary is empty");
  if (penalties_active()) scratch_.resize(size_t(vocab));
  in_context_.assign(size_t(vocab), 0);
  generated_count_.assign(size_t(vocab), 0);
  if (!options.greedy()) candidates_.reserve(size_t(vocab));
}

void Sampler::note_in_context(int64_t id) {
  if (id < 0 || id >= vocab_) fail("sampling", "token id " + std::to_string(id) + " is outside the vocabulary");
  if (!in_context_[size_t(id)]) {
    in_context_[size_t(id)] = 1;
    touched_.push_back(id);
  }
}

void Sampler::begin(std::span<const int64_t> context) {
  for (int64_t id : touched_) {
    in_context_[size_t(id)] = 0;
    generated_count_[size_t(id)] = 0;
  }
  touched_.clear();
  for (int64_t id : context) note_in_context(id);
}

bool Sampler::penalties_active() const {
  return options_.repetition_penalty != 1.0 || options_.presence_penalty != 0.0 || options_.frequency_penalty != 0.0;
}

void Sampler::penalize(std::span<float> logits) const {
  for (int64_t id : touched_) penalize_one(logits[size_t(id)], generated_count_[size_t(id)], options_);
}

double Sampler::uniform() {
  return double(rng_() >> 11) * 0x1.0p-53;  // the top 53 bits: exactly representable
}

int64_t Sampler::next(const float* logits) {
  std::span<const float> row(logits, size_t(vocab_));
  if (penalties_active()) {  // penalize a copy: the caller's logits stay as the model gave them
    std::copy(row.begin(), row.end(), scratch_.begin());
    penalize(scratch_);
    row = scratch_;
  }
  int64_t token = 0;
  if (options_.greedy()) {
    token = argmax(row.data(), vocab_);
  } else {
    const size_t n = filter(row, options_, candidates_);
    double total = 0;
    for (size_t i = 0; i < n; ++i) total += candidates_[i].weight;
    const double target = uniform() * total;
    double cumulative = 0;
    token = candidates_[0].id;
    for (size_t i = 0; i < n; ++i) {
      if (candidates_[i].weight <= 0) continue;
      token = candidates_[i].id;  // the last positive one, should rounding leave target unreached
      cumulative += candidates_[i].weight;
      if (cumulative > target) break;
    }
  }
  note_in_context(token);
  ++generated_count_[size_t(token)];
  return token;
}

}  // namespace deltagen
