// Prompt-lookup drafting (speculative decoding without weights, issue 27):
// the tokens that followed the latest earlier occurrence of the sequence's
// last n tokens, tried from the longest n down. Edits, code and summaries
// repeat their input, so the drafts are often right and cost nothing to make.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace deltagen {

struct NgramDraftOptions {
  int64_t max_ngram = 4;  // the longest suffix looked up
  int64_t min_ngram = 2;  // the shortest; below it, no draft
};

// Up to `k` draft tokens for what follows `tokens` (the prompt and what was
// generated so far); empty when no suffix of min_ngram..max_ngram tokens
// occurred before. A longer match wins; among equal ones, the latest. The
// draft is what followed the match in `tokens`, so it can run into the
// suffix itself (a repeating pattern continues).
std::vector<int64_t> ngram_draft(std::span<const int64_t> tokens, int64_t k, const NgramDraftOptions& options = {});

}  // namespace deltagen
