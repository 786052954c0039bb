// The generation loop over a batch: every row appends its own tokens (run
// row by row), then all rows decode together, one token per step, each with
// its own sampler and stop condition. A row that stops is parked (its state
// kept exactly as it was) while the others go on.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deltagen/options.h"
#include "runtime/generator.h"

namespace deltagen {

class Tokenizer;

// Throws Error(flag + ": must be between 1 and ...") for a guess count outside
// 1..SpeculativeOptions::kMaxDraftTokens (validate_speculative, bench's flags).
void check_draft_tokens(const std::string& flag, int64_t draft_tokens);

// Throws Error naming the first id outside the model's vocabulary.
void check_token_ids(const Model& model, std::span<const int64_t> ids);

// Called for every generated token with the text it completed (empty
// without a tokenizer, or while a possible stop string is held back).
// Returning false stops that row (StopReason::Cancelled).
using TokenCallback = std::function<bool(int64_t row, int64_t token, std::string_view text)>;

// feeds[b] = the tokens row b appends before it generates (the previous
// reply's last token, if any, then the new prompt); it must not be empty.
// Rows continue from whatever the generator's state holds. The last
// generated token of each row is not run: callers keep it and feed it first
// next time. Throws Error when a feed is empty, holds an unknown id or does
// not fit the generator's maximum length.
std::vector<GenerationResult> generate_rows(Generator& generator, std::span<const std::vector<int64_t>> feeds,
                                            const GenerationOptions& options, const Tokenizer* tokenizer,
                                            const TokenCallback& on_token);

}  // namespace deltagen
