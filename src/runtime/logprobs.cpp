#include "runtime/logprobs.h"

#include <algorithm>
#include <cmath>

#include "deltagen/error.h"

namespace deltagen {

TokenLogprobs token_logprobs(const float* logits, int64_t vocab, int64_t chosen, int64_t top) {
  if (vocab < 1 || chosen < 0 || chosen >= vocab || top < 0) fail("logprobs", "id or count out of range");
  top = std::min(top, vocab);
  // log p_i = x_i - (max + log sum exp(x - max)), summed in double.
  const float max_logit = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - double(max_logit));
  const double log_normalizer = double(max_logit) + std::log(sum);
  auto logprob = [&](int64_t id) { return double(logits[id]) - log_normalizer; };

  TokenLogprobs out;
  out.chosen = {chosen, logprob(chosen)};
  if (top == 0) return out;
  std::vector<int64_t> ids(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) ids[size_t(i)] = i;
  auto better = [&](int64_t a, int64_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  std::partial_sort(ids.begin(), ids.begin() + top, ids.end(), better);
  for (int64_t i = 0; i < top; ++i) out.top.push_back({ids[size_t(i)], logprob(ids[size_t(i)])});
  return out;
}

}  // namespace deltagen
