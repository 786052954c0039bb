#include "tools/generation_flags.h"

#include <cstdio>

#include "deltagen/error.h"

namespace deltagen {

GenerationOptions parse_generation_flags(Args& args, const GenerationOptions& defaults, int64_t min_new_tokens) {
  GenerationOptions o = defaults;
  SamplingOptions& s = o.sampling;
  s.temperature = args.get_double("temperature", s.temperature);
  s.top_k = args.get_int("top-k", s.top_k);
  s.top_p = args.get_double("top-p", s.top_p);
  s.min_p = args.get_double("min-p", s.min_p);
  s.repetition_penalty = args.get_double("repetition-penalty", s.repetition_penalty);
  s.presence_penalty = args.get_double("presence-penalty", s.presence_penalty);
  s.frequency_penalty = args.get_double("frequency-penalty", s.frequency_penalty);
  const int64_t seed = args.get_int("seed", int64_t(s.seed));
  if (seed < 0) fail("--seed", "must not be negative");
  s.seed = uint64_t(seed);

  o.max_new_tokens = args.get_int("max-new-tokens", o.max_new_tokens);
  if (o.max_new_tokens < min_new_tokens)
    fail("--max-new-tokens", min_new_tokens == 0 ? "must not be negative" : "must be at least 1 (0 only with --save-state)");
  o.prefill_chunk = args.get_int("prefill-chunk", o.prefill_chunk);
  if (o.prefill_chunk < 0) fail("--prefill-chunk", "must be 0 (whole prompt) or a positive number of tokens");
  if (auto stop = args.get("stop")) {
    if (stop->empty()) fail("--stop", "must not be empty");
    o.stop_strings.push_back(*stop);
  }
  if (auto method = args.get("speculative")) o.speculative.method = parse_speculative_method(*method);
  o.speculative.draft_tokens = args.get_int("draft-tokens", o.speculative.draft_tokens);
  validate_speculative(o.speculative);
  args.flag("stop-at-eos");  // the default; kept so that older command lines still work
  o.stop_at_eos = !args.flag("ignore-eos");
  return o;
}

EngineOptions parse_engine_flags(Args& args) {
  EngineOptions e;
  const int64_t threads = args.get_int("threads", 0);
  if (threads < 0 || threads > 1024) fail("--threads", "must be between 0 (ONNX Runtime's default) and 1024");
  e.threads = int(threads);
  e.max_length = args.get_int("max-length", 0);
  if (e.max_length < 0) fail("--max-length", "must be a positive number of tokens");
  e.tokenizer = args.get_or("tokenizer", "");
  e.kernels = get_kernel_flags(args);
  e.ep = get_ep_flag(args, "ep");
  return e;
}

nlohmann::json result_json(const GenerationResult& r) {
  nlohmann::json j;
  j["generated_ids"] = r.generated_ids;
  j["text"] = r.text;
  j["stop_reason"] = stop_reason_name(r.stop_reason);
  j["stopped_at_eos"] = r.stop_reason == StopReason::Eos;
  j["prompt_tokens"] = r.prompt_tokens;
  j["prefilled_tokens"] = r.prefilled_tokens;
  j["new_tokens"] = r.generated_ids.size();
  j["prefill_runs"] = r.prefill_runs;
  j["prefill_seconds"] = r.prefill_seconds;
  j["decode_steps"] = r.decode_steps;
  j["decode_seconds"] = r.decode_seconds;
  if (r.verify_runs > 0) {
    j["verify_runs"] = r.verify_runs;
    j["drafted_tokens"] = r.drafted_tokens;
    j["accepted_tokens"] = r.accepted_tokens;
    j["replayed_tokens"] = r.replayed_tokens;
  }
  j["prompt_tokens_per_second"] = r.prompt_tokens_per_second();
  j["generation_tokens_per_second"] = r.generation_tokens_per_second();
  if (r.images > 0) {
    j["images"] = r.images;
    j["image_tokens"] = r.image_tokens;
    j["image_encode_seconds"] = r.image_encode_seconds;
  }
  return j;
}

void print_speed(const GenerationResult& r) {
  if (r.images > 0)
    std::fprintf(stderr, "images: %lld (%lld tokens) decoded, preprocessed and encoded in %.4f s\n",
                 (long long)r.images, (long long)r.image_tokens, r.image_encode_seconds);
  std::fprintf(stderr, "prompt: %lld tokens in %.4f s (%.1f tokens/s)\n", (long long)r.prefilled_tokens,
               r.prefill_seconds, r.prompt_tokens_per_second());
  std::fprintf(stderr, "generation: %zu tokens, %lld decode steps in %.4f s (%.1f tokens/s), stop: %s\n",
               r.generated_ids.size(), (long long)r.decode_steps, r.decode_seconds, r.generation_tokens_per_second(),
               stop_reason_name(r.stop_reason));
  if (r.verify_runs > 0)
    std::fprintf(stderr, "speculative: %lld verify runs, %lld of %lld guesses kept (%.0f%%), %lld tokens run again\n",
                 (long long)r.verify_runs, (long long)r.accepted_tokens, (long long)r.drafted_tokens,
                 r.drafted_tokens > 0 ? 100.0 * double(r.accepted_tokens) / double(r.drafted_tokens) : 0.0,
                 (long long)r.replayed_tokens);
}

}  // namespace deltagen
