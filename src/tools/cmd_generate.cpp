// deltagen generate --model DIR --ids 5,17,300 --max-new-tokens N
//                   [--prefill-chunk K] [--logits-out F.npy] [--json]
//                   [--threads T] [--stop-at-eos]
// Greedy generation from token ids. Prints the new ids on one line (stdout)
// and the speed on stderr, or everything as one JSON object with --json.
// --logits-out writes f32 [prompt + decode steps, vocab]: the prompt rows,
// then one row per decode step.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/generator.h"
#include "runtime/session.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "util/error.h"
#include "util/npy.h"

namespace deltagen {
namespace {

struct GenerateFlags {
  std::string model_dir;
  std::vector<int64_t> prompt;
  GenerateOptions options;
  std::string logits_out;  // empty: none
  bool json = false;
  int threads = 0;
};

GenerateFlags parse_flags(int argc, char** argv) {
  Args args(argc, argv, {"json", "stop-at-eos"});
  GenerateFlags f;
  f.model_dir = args.require("model");
  f.prompt = parse_ids(args.require("ids"), "--ids");
  args.require("max-new-tokens");
  f.options.max_new_tokens = args.get_int("max-new-tokens", 0);
  f.options.prefill_chunk = args.get_int("prefill-chunk", 0);
  f.logits_out = args.get_or("logits-out", "");
  f.json = args.flag("json");
  f.options.stop_at_eos = args.flag("stop-at-eos");
  const int64_t threads = args.get_int("threads", 0);
  args.finish();

  if (f.options.max_new_tokens < 1) fail("--max-new-tokens", "must be at least 1");
  if (f.options.prefill_chunk < 0) fail("--prefill-chunk", "must be 0 (whole prompt) or a positive number of tokens");
  if (threads < 0 || threads > 1024) fail("--threads", "must be between 0 (ONNX Runtime's default) and 1024");
  f.threads = int(threads);
  f.options.collect_logits = !f.logits_out.empty();
  return f;
}

std::string ids_line(const std::vector<int64_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  return line;
}

nlohmann::json result_json(const GenerateFlags& f, const GenerateResult& r) {
  nlohmann::json j;
  j["model"] = f.model_dir;
  j["prompt_ids"] = f.prompt;
  j["generated_ids"] = r.generated_ids;
  j["prompt_tokens"] = r.prompt_tokens;
  j["new_tokens"] = r.generated_ids.size();
  j["prefill_chunk"] = f.options.prefill_chunk;
  j["prefill_runs"] = r.prefill_runs;
  j["prefill_seconds"] = r.prefill_seconds;
  j["decode_steps"] = r.decode_steps;
  j["decode_seconds"] = r.decode_seconds;
  j["prompt_tokens_per_second"] = r.prompt_tokens_per_second();
  j["generation_tokens_per_second"] = r.generation_tokens_per_second();
  j["stopped_at_eos"] = r.stopped_at_eos;
  j["threads"] = f.threads;
  if (!f.logits_out.empty()) j["logits_out"] = f.logits_out;
  return j;
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  const GenerateFlags f = parse_flags(argc, argv);

  RuntimeOptions runtime;
  runtime.intra_op_threads = f.threads;
  auto model = Model::load(f.model_dir, runtime);
  check_request(*model, f.prompt, f.options.max_new_tokens);

  Generator generator(*model);
  const GenerateResult r = generate_greedy(generator, f.prompt, f.options);

  if (!f.logits_out.empty())
    write_npy_f32(f.logits_out, r.logits.data(), {r.logits_rows, r.vocab});

  if (f.json) {
    std::printf("%s\n", result_json(f, r).dump().c_str());
  } else {
    std::printf("%s\n", ids_line(r.generated_ids).c_str());
    std::fprintf(stderr, "prompt: %lld tokens in %.4f s (%.1f tokens/s)\n", (long long)r.prompt_tokens,
                 r.prefill_seconds, r.prompt_tokens_per_second());
    std::fprintf(stderr, "generation: %zu tokens, %lld decode steps in %.4f s (%.1f tokens/s)\n",
                 r.generated_ids.size(), (long long)r.decode_steps, r.decode_seconds,
                 r.generation_tokens_per_second());
  }
  return 0;
}

}  // namespace deltagen
