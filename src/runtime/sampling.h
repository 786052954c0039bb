// Choosing the next token from one row of logits: penalties, then greedy
// argmax or a seeded draw from the temperature / top-k / top-p / min-p
// filtered distribution (see SamplingOptions in deltagen/options.h).
// All buffers are sized to the vocabulary once; choosing a token allocates nothing.
//
// A constrained choice (structured output: runtime/json_grammar.h and
// runtime/token_table.h) only picks ids a predicate allows; see
// choose_allowed below (sampling_constrained.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "deltagen/options.h"

namespace deltagen {

// Throws Error ("sampling: ...") for settings outside their range.
void validate_sampling(const SamplingOptions& options);

// The first index of the largest value.
int64_t argmax(const float* row, int64_t n);

struct Candidate {
  int64_t id = 0;
  float logit = 0;    // after penalties
  double weight = 0;  // exp((logit - max) / temperature), unnormalized
};

// The order every filter and the greedy choice use: the higher logit first,
// then the lower id (a fixed order for ties, as argmax's "first index").
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
}

// The distribution a non-greedy draw picks from: the candidates that survive
// top-k, top-p and min-p, best first, with probabilities summing to 1.
// For tests and inspection; Sampler uses the same code.
struct TokenProbability {
  int64_t id = 0;
  double probability = 0;
};
std::vector<TokenProbability> filtered_distribution(std::span<const float> logits, const SamplingOptions& options);

// Applies the repetition / presence / frequency penalties to `logits` in place:
// `context` = every token of the sequence so far, `generated` = those of the current request.
void apply_penalties(std::span<float> logits, std::span<const int64_t> context, std::span<const int64_t> generated,
                     const SamplingOptions& options);

// A constraint on the next token: allowed(id) says whether id may come next;
// fill_mask, optional, writes mask[id] = 1 or 0 for every id at once (much
// faster than vocabulary-many calls; it is asked only when a step would have
// to test many ids).
using TokenAllowed = std::function<bool(int64_t id)>;
using TokenMaskFill = std::function<void(std::span<uint8_t> mask)>;

// Working memory of choose_allowed, kept between steps.
struct ConstrainedScratch {
  std::vector<Candidate> candidates;
  std::vector<uint8_t> mask;
  std::vector<double> cumulative;  // weights of the allowed ids met so far, summed
  std::vector<int64_t> allowed;    // those ids, best first
};

// choose_allowed tests ids one by one, best first, at most this many; then
// it asks fill_mask for all. It asks sooner, after kProbeChecks, when most of
// those were refused: a restrictive state, where the whole mask is cheap
// (most tokens fail on their first byte) and the allowed ids may lie deep.
constexpr size_t kChecksBeforeMask = 256;
constexpr size_t kProbeChecks = 64;

// The constrained choice. Its distribution is exactly next()'s with every
// disallowed logit at -inf: the mask comes first, then temperature, top-k,
// top-p and min-p act on what is left (as in llama.cpp and vLLM), so top-k
// keeps the k best allowed ids, top-p the allowed ids that make p of the
// allowed mass. Greedy: the best allowed id (u unused). Else the id at `u`
// (uniform in [0, 1)) in the inverse CDF of that distribution, ids best first.
//
// It never tests more ids than it must: it walks the ids best first (sorting
// a chunk at a time) and stops as soon as the walked ones settle both the
// cut of the filters and the id under u whatever the rest turn out to be:
// the rest weigh at most what is left unwalked, an upper bound for the
// allowed mass still unseen. Typically one id is tested. Once it has the
// whole mask (see kChecksBeforeMask) it drops the refused ids and walks on
// over the allowed ones: the same u, the same order, so the same answer,
// only found faster. Throws Error ("sampling: no token is allowed") when none is.
int64_t choose_allowed(std::span<const float> logits, const SamplingOptions& options, double u,
                       const TokenAllowed& allowed, const TokenMaskFill& fill_mask, ConstrainedScratch& scratch,
                       size_t checks = kChecksBeforeMask);

// One sequence's token chooser. Keeps the counts the penalties need, updated
// token by token instead of recounted.
class Sampler {
 public:
  Sampler(const SamplingOptions& options, int64_t vocab, uint64_t seed);

  // Starts a request. `context` = the tokens already in the sequence before
  // it generates (history and prompt).
  void begin(std::span<const int64_t> context);
  // Chooses the next token and records it as generated.
  int64_t next(const float* logits);
  // The same among the ids `allowed` admits (choose_allowed): greedy takes
  // the best allowed id; a sampled step draws one uniform, as next() does.
  // With every id allowed it draws from the same distribution as next(), not
  // the same ids for a seed (the inverse CDF runs best first here).
  int64_t next(const float* logits, const TokenAllowed& allowed, const TokenMaskFill& fill_mask = {});

 private:
  void note_in_context(int64_t id);
  bool penalties_active() const;
  void penalize(std::span<float> logits) const;
  double uniform();  // [0, 1), the same on every platform for a seed

  SamplingOptions options_;
  int64_t vocab_;
  std::mt19937_64 rng_;
  std::vector<float> scratch_;            // the penalized logits of one step (with penalties only)
  std::vector<uint8_t> in_context_;       // per id: appears in the sequence
  std::vector<int32_t> generated_count_;  // per id: times generated by this request
  std::vector<int64_t> touched_;          // ids with in_context_ set
  std::vector<Candidate> candidates_;
  ConstrainedScratch constrained_;
};

}  // namespace deltagen
