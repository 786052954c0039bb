// Log-probabilities of a generated token and of its best alternatives, as
// OpenAI's `logprobs` / `top_logprobs` report them: from the model's own
// distribution (log-softmax of the raw logits, before penalties and
// temperature), whatever the sampler then did.
#pragma once
#include <cstdint>
#include <vector>

namespace deltagen {

struct TokenLogprob {
  int64_t id = 0;
  double logprob = 0;
};

struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the `top` most likely ids, best first (ties: lower id first)
};

// `top` in [0, vocab]; `chosen` an id in [0, vocab).
TokenLogprobs token_logprobs(const float* logits, int64_t vocab, int64_t chosen, int64_t top);

}  // namespace deltagen
