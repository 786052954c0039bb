// deltagen bench --model DIR [--vs DIR] [--prompt N] [--gen M] [--warmup W] [--runs R]
//                [--threads T] [--batch B] [--seed S] [--max-foreign PCT] [--rerun-noisy K]
//                [--mem-bandwidth GBPS] [--kernels deltagen|ort] [--vs-kernels deltagen|ort]
//                [--ep cpu|webgpu|cuda] [--vs-ep cpu|webgpu|cuda] (--vs-ep without --vs: the
//                same model on two providers)
//                [--session-config KEY=VALUE,...] [--vs-session-config KEY=VALUE,...]
//                [--speculative none|ngram|mtp|ceiling|mtp-ceiling] [--draft-tokens K] (and --vs-speculative,
//                --vs-draft-tokens for B): decode with guesses, batch 1; ceiling keeps k guesses
//                every round (a drafter that is always right: the speed limit, docs/speculative.md),
//                mtp-ceiling keeps every guess of the MTP head (the limit with its drafting cost)
//                [--profile] (ONNX Runtime's profiler on: where the time goes, per group of runs of
//                the same positions, by place in the model and by op type; measure/time_profile.h)
//                [--json | --markdown] [--json-out FILE]
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "measure/bench.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "deltagen/error.h"

namespace deltagen {

int cmd_bench(int argc, char** argv) {
  Args args(argc, argv, {"json", "markdown", "profile"});
  measure::BenchOptions o;
  std::vector<std::filesystem::path> dirs = {args.require("model")};
  const auto vs = args.get("vs");
  if (vs) dirs.push_back(*vs);
  o.prompt_tokens = args.get_int("prompt", o.prompt_tokens);
  o.gen_tokens = args.get_int("gen", o.gen_tokens);
  o.warmup = args.get_int("warmup", o.warmup);
  o.runs = args.get_int("runs", o.runs);
  o.threads = int(args.get_int("threads", o.threads));
  o.batch = args.get_int("batch", o.batch);
  o.seed = uint64_t(args.get_int("seed", int64_t(o.seed)));
  o.max_foreign_pct = args.get_double("max-foreign", o.max_foreign_pct);
  o.rerun_noisy = args.get_int("rerun-noisy", o.rerun_noisy);
  o.mem_bandwidth_gbps = args.get_double("mem-bandwidth", o.mem_bandwidth_gbps);
  o.kernels[0].set = get_kernels_flag(args, "kernels");
  o.kernels[1].set = get_kernels_flag(args, "vs-kernels");
  o.ep[0] = get_ep_flag(args, "ep");
  const auto vs_ep = get_ep_flag(args, "vs-ep");
  o.ep[1] = vs_ep ? vs_ep : o.ep[0];
  if (!vs && vs_ep) dirs.push_back(dirs[0]);
  for (int i = 0; i < 2; ++i) {
    const std::string vs_prefix = i == 0 ? "" : "vs-";
    if (auto m = args.get(vs_prefix + "speculative"))
      o.speculation[i].method = measure::parse_bench_speculation("--" + vs_prefix + "speculative", *m);
    o.speculation[i].draft_tokens = args.get_int(vs_prefix + "draft-tokens", o.speculation[i].draft_tokens);
  }
  o.session_config[0] = get_session_config_flag(args, "session-config");
  o.session_config[1] = get_session_config_flag(args, "vs-session-config");
  o.profile = args.flag("profile");
  const bool as_json = args.flag("json"), as_markdown = args.flag("markdown");
  const auto json_out = args.get("json-out");
  args.finish();
  if (as_json && as_markdown) fail("bench", "--json and --markdown exclude each other");
  measure::validate(o);
  o.progress = ::isatty(STDERR_FILENO) != 0;

  measure::BenchReport report = measure::run_bench(dirs, o);
  if (json_out) {
    std::ofstream out(*json_out);
    out << measure::to_json(report).dump(2) << "\n";
    if (!out) fail(*json_out, "cannot write the file");
  }
  const std::string text = as_json       ? measure::to_json(report).dump(2) + "\n"
                           : as_markdown ? measure::to_markdown(report)
                                         : measure::to_text(report);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace deltagen
