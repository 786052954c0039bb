#include "speculative/ngram_draft.h"

#include <algorithm>

namespace deltagen {

std::vector<int64_t> ngram_draft(std::span<const int64_t> tokens, int64_t k, const NgramDraftOptions& o) {
  const int64_t len = int64_t(tokens.size());
  if (k <= 0 || o.min_ngram < 1) return {};
  for (int64_t n = std::min(o.max_ngram, len - 1); n >= o.min_ngram; --n) {
    const std::span<const int64_t> suffix = tokens.subspan(size_t(len - n));
    // Latest earlier occurrence: a start s < len - n whose n tokens equal the
    // suffix and which has at least one token after it.
    for (int64_t s = len - n - 1; s >= 0; --s) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + s)) continue;
      const int64_t from = s + n, count = std::min(k, len - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

}  // namespace deltagen
