// deltagen bench: the speed of a built model, measured the way the upstream
// onnxruntime-genai benchmark and llama-bench measure it, plus what a shared
// machine needs to trust the numbers.
//
// One run (after Generator::reset):
//   prefill   a prompt of N pseudo-random token ids per row in one run, logits
//             of the last position only; prompt tokens/s = batch * N / its
//             wall time;
//   first     argmax of those logits: the first generated token. Time to first
//             token = prefill + this argmax;
//   decode    M - 1 further greedy steps, one model run each, every step timed
//             on its own (run + argmax). The first decode step is reported on
//             its own (first_step) and left out of the decode statistics, as
//             upstream does; generation tokens/s = batch / mean step time over
//             the rest, and the latency percentiles come from the same steps.
// W warm-up runs come first and are not reported; R measured runs follow.
//
// Every run records the interference meter (measure/meters.h); a run with
// more than max_foreign_pct of a core used by other processes is "noisy".
// Summaries use the clean runs only (all runs if none is clean, flagged), and
// rerun_noisy allows that many extra runs to replace noisy ones.
//
// --vs: two models loaded in one process and run alternately (A B A B ...),
// each pair giving B/A ratios, so that slow drifts of a shared VM hit both
// sides of a ratio alike.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "measure/graph_facts.h"
#include "measure/meters.h"
#include "measure/stats.h"
#include "measure/time_profile.h"
#include "runtime/kernel_options.h"

namespace deltagen::measure {

struct BenchSpeculation {
  // Ceiling: every guess kept (guesses that cost nothing: the speed limit);
  // MtpCeiling: the MTP head's guesses, every one kept (the limit with the
  // head's drafting cost).
  enum class Method { None, Ngram, Mtp, Ceiling, MtpCeiling } method = Method::None;
  int64_t draft_tokens = 3;
  bool active() const { return method != Method::None; }
};
// "none", "ngram", "mtp", "ceiling", "mtp-ceiling"; else Error naming `flag`.
BenchSpeculation::Method parse_bench_speculation(const std::string& flag, const std::string& name);
const char* bench_speculation_name(BenchSpeculation::Method method);

struct BenchOptions {
  int64_t prompt_tokens = 1000;  // N per row
  int64_t gen_tokens = 100;      // M per row, the first one from the prefill
  int64_t warmup = 1;            // W, per model
  int64_t runs = 5;              // R, per model (pairs with --vs)
  int64_t batch = 1;
  int threads = 0;               // ONNX Runtime intra-op threads; 0 = its default
  uint64_t seed = 0;             // of the prompt ids
  double max_foreign_pct = 15;   // a run above this is noisy
  int64_t rerun_noisy = 0;       // extra runs (or pairs) allowed to replace noisy ones
  double mem_bandwidth_gbps = 0; // the machine's read bandwidth, for the efficiency column; 0 = unknown
  bool progress = false;         // progress lines on stderr (the CLI sets it only for a terminal)
  // Per model (A, then B with --vs): which kernels run it. `bench --model X
  // --vs X --kernels ort` pairs the stock kernels against deltagen's on one file.
  KernelOptions kernels[2];
  // Per model: the execution provider (bench --ep / --vs-ep; --vs-ep alone
  // pairs one file against itself on two providers).
  std::optional<ExecutionProvider> ep[2];  // none = the model's own
  // Per model: extra session config entries (RuntimeOptions::session_config),
  // so one file can be paired against itself with one kernel switch flipped.
  SessionConfig session_config[2];
  // Per model: speculative decoding in the decode phase (batch 1; the bench's
  // greedy tokens are then the generation loop's, runtime/generation.cpp).
  // `ceiling` guesses k tokens every round and keeps them all: the speed of a
  // drafter that is always right (the output is not the model's).
  BenchSpeculation speculation[2];
  // ONNX Runtime's profiler on for every run (warm-ups too): where the time
  // goes, per group of runs of the same positions (measure/time_profile.h).
  // It slows every node a little: the speed figures of such a run are not
  // the model's.
  bool profile = false;
};

// Throws Error for values no benchmark can run with.
void validate(const BenchOptions& o);

struct BenchRun {
  double prefill_seconds = 0;
  double ttft_seconds = 0;        // prefill + the first argmax
  double first_step_seconds = 0;  // the first decode step (0 with M < 2)
  std::vector<double> step_seconds;  // decode steps 2 .. M-1
  double prompt_tps = 0;
  double gen_tps = 0;             // batch / mean(step_seconds); 0 without steps
  Interference meter;
  bool noisy = false;
  // With speculation: the decode phase's runs (verify runs, plain steps and
  // replays), the guesses made and kept, and its time.
  int64_t decode_runs = 0, decoded_tokens = 0, verify_runs = 0, drafted_tokens = 0, accepted_tokens = 0;
  double decode_seconds = 0, draft_seconds = 0;
};

struct BenchStats {
  int64_t runs = 0;         // runs measured
  int64_t clean_runs = 0;   // runs below the interference threshold: the ones the summaries use
  bool noisy_only = false;  // no run was clean: the summaries use all of them, flagged
  Summary prompt_tps, gen_tps, ttft_ms, first_step_ms, foreign_cpu_pct;
  double step_p50_ms = 0, step_p90_ms = 0, step_p99_ms = 0;  // over the clean runs' steps
  // Weights streamed per second in decode: decode_read_bytes * steps/s.
  double decode_weight_gbps = 0;
  double bandwidth_efficiency = 0;  // decode_weight_gbps / the machine's bandwidth; 0 = unknown
  // With speculation (clean runs): tokens per decode-phase run, the share of
  // guesses kept, and the mean time of one such run.
  double tokens_per_run = 0, kept_share = 0, run_ms = 0;
  double draft_ms = 0;  // guessing, per verify run (inside run_ms)
};

struct BenchModel {
  std::string label;
  std::filesystem::path dir;
  std::string kernels;             // "deltagen" (N MatMulNBits nodes on deltagen's kernels) or "ort"
  std::string ep;                  // "cpu", "webgpu", "cuda"
  GraphFacts graph;
  double load_seconds = 0;         // Model::load + allocating the generator's state
  int64_t rss_after_load_bytes = 0;
  int64_t load_rss_bytes = 0;      // VmRSS growth during the load
  std::vector<BenchRun> runs;      // measured runs, in order (warm-ups are not kept)
  BenchStats stats;
  std::vector<RunGroup> time_profile;  // with BenchOptions::profile
};

struct BenchPair {
  int64_t index = 0;
  double prompt_ratio = 0;  // B / A tokens/s
  double gen_ratio = 0;
  bool noisy = false;       // either run was
};

struct BenchReport {
  BenchOptions options;
  std::vector<BenchModel> models;  // one, or A and B with --vs
  std::vector<BenchPair> pairs;    // --vs only
  Summary prompt_ratio, gen_ratio; // over clean pairs (all if none is clean)
  int64_t clean_pairs = 0;
  int64_t peak_rss_bytes = 0;      // VmHWM of the process at the end
};

// Benchmarks one model, or `dirs[0]` against `dirs[1]` alternately.
BenchReport run_bench(const std::vector<std::filesystem::path>& dirs, const BenchOptions& options);

nlohmann::json to_json(const BenchReport& r);
// Per-run lines (noisy runs marked), then a llama-bench-style markdown table
// and, with two models, the per-pair ratios.
std::string to_text(const BenchReport& r);
// Only the markdown tables (for docs/results.md).
std::string to_markdown(const BenchReport& r);

}  // namespace deltagen::measure
