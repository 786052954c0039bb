// Flags shared by `deltagen generate` and `deltagen chat`: sampling, stopping,
// engine settings, and the per-request JSON / stats output.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "deltagen/deltagen.h"
#include "tools/args.h"

namespace deltagen {

// --temperature --top-k --top-p --min-p --repetition-penalty
// --presence-penalty --frequency-penalty --seed --max-new-tokens
// --prefill-chunk --stop --ignore-eos (--stop-at-eos: the default, accepted);
// what a flag does not set keeps its value in `defaults`.
// --max-new-tokens must be at least `min_new_tokens` (0: a prefill-only run).
GenerationOptions parse_generation_flags(Args& args, const GenerationOptions& defaults, int64_t min_new_tokens = 1);

// --threads --max-length --tokenizer --kernels --max-isa --ep
EngineOptions parse_engine_flags(Args& args);

// The per-sequence fields of a result.
nlohmann::json result_json(const GenerationResult& r);

// "prompt: ... tokens/s" and "generation: ... tokens/s" on stderr.
void print_speed(const GenerationResult& r);

// Generated text on stdout, flushed at once: each token shows as it is decoded.
inline void print_text(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace deltagen
