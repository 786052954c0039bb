// deltagen compare: how far model B's predictions are from model A's (or from
// the float64 C++ reference), measured the way llama.cpp's perplexity tool
// reports a quantization (mean / 99th / 99.9th percentile KL divergence,
// "same top p", perplexity ratio), plus max and mean |logit difference| and
// greedy agreement over a continuation.
//
// Teacher forcing: the corpus is cut into windows of `context` tokens; each
// window starts from an empty state and is fed in runs of `chunk` tokens
// (the state carries between runs; chunks only bound the memory the logits
// take). Position i of a window is scored against the token at i + 1, so a
// window of C tokens scores C - 1 positions. Both sides see identical input.
//
// Greedy agreement: both sides continue the first `greedy_prompt` corpus
// tokens greedily for `greedy_tokens` tokens; the result is how many
// generated tokens agree before the first difference.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "measure/graph_facts.h"
#include "models/build.h"

namespace deltagen::measure {

struct CompareOptions {
  int64_t context = 512;        // tokens per teacher-forced window
  int64_t chunk = 128;          // tokens per run inside a window
  int64_t greedy_prompt = 32;   // corpus tokens the greedy continuation starts from
  int64_t greedy_tokens = 256;  // 0 = no greedy comparison
  int threads = 0;              // ONNX Runtime intra-op threads; 0 = its default
  bool progress = false;        // a progress line on stderr
  // Where --depth runs A and B (compare --a-ep / --b-ep).
  std::optional<ExecutionProvider> ep_a, ep_b;  // none = each model's own
};

void validate(const CompareOptions& o);

// The residual stream of a model between its layers (`compare --layers`).
struct LayerStates {
  int64_t hidden_size = 0;
  std::vector<std::string> layer_types;  // per decoder layer: "linear_attention" | "full_attention"
  // Of the last feed(): [N + 1] x [ids * hidden_size]; 0 = the embeddings,
  // k = after layer k - 1 (N: before the final norm).
  std::vector<std::vector<double>> streams;
};

// Something that produces next-token logits: an ONNX model through the
// runtime, or the float64 reference.
class LogitSource {
 public:
  virtual ~LogitSource() = default;
  virtual std::string name() const = 0;
  virtual int64_t vocab() const = 0;
  virtual int64_t context_length() const = 0;  // 0 = unknown
  // Back to the empty state.
  virtual void reset() = 0;
  // Appends `ids` to the state; `logits` becomes [ids.size(), vocab].
  virtual void feed(std::span<const int64_t> ids, std::vector<double>& logits) = 0;
  // Greedy continuation of `prompt` from an empty state (argmax, lowest id on ties).
  virtual std::vector<int64_t> greedy(std::span<const int64_t> prompt, int64_t new_tokens) = 0;
  // The residual stream of the last feed() when the source was made with
  // `layers` (else nullptr).
  virtual const LayerStates* layers() const { return nullptr; }
};

class Progress;

// The teacher-forced walk every comparison makes: the corpus in windows of
// o.context tokens, each from a fresh state, fed to A and B in chunks of
// o.chunk. After each chunk, on_chunk(window_end, first, count, logits_a,
// logits_b): positions [first, first + count) of the corpus, logits
// [count, vocab] each. Returns the number of windows.
using OnChunk = std::function<void(int64_t window_end, int64_t first, int64_t count, const std::vector<double>& logits_a,
                                   const std::vector<double>& logits_b)>;
int64_t feed_windows(LogitSource& a, LogitSource& b, std::span<const int64_t> corpus, const CompareOptions& o,
                     Progress& progress, const std::string& label, const OnChunk& on_chunk);

// `max_length`: the longest sequence the source will be fed at once (window or
// greedy prompt + continuation).
// kernels: which kernels run the model (runtime/session.h). `layers`: keep
// the residual stream too (an ONNX model needs a --layer-outputs build; Error otherwise).
std::unique_ptr<LogitSource> onnx_source(const std::filesystem::path& model_dir, int threads, int64_t max_length,
                                         KernelSet kernels = KernelSet::Deltagen, bool layers = false,
                                         std::optional<ExecutionProvider> ep = std::nullopt);
std::unique_ptr<LogitSource> reference_source(const std::filesystem::path& checkpoint_dir, bool layers = false);

// Per-position comparison of two logit rows, accumulated over a corpus.
class FidelityAccumulator {
 public:
  // `next` = the corpus token that follows the position (it scores perplexity).
  void add(const double* a, const double* b, int64_t vocab, int64_t next);
  struct Result;
  Result result() const;

 private:
  std::vector<double> kl_;
  int64_t top1_same_ = 0;
  double abs_diff_sum_ = 0, abs_diff_max_ = 0, sq_diff_sum_ = 0, sq_a_sum_ = 0;
  int64_t logit_count_ = 0;
  double nll_a_ = 0, nll_b_ = 0, dp_sq_ = 0;
  std::vector<double> la_, lb_;  // scratch: log-softmax rows
};

struct FidelityAccumulator::Result {
  int64_t positions = 0;
  double kl_mean = 0, kl_median = 0, kl_p99 = 0, kl_p999 = 0, kl_max = 0;  // KL(A || B), nats
  int64_t top1_same = 0;
  double top1_agreement = 0;  // fraction of positions with the same argmax
  double max_abs_logit_diff = 0, mean_abs_logit_diff = 0;
  double logits_nmse = 0;  // sum (b - a)^2 / sum a^2 over every logit
  double ppl_a = 0, ppl_b = 0, ppl_ratio = 0;  // exp(mean NLL of the next corpus token); ratio B / A
  double rms_dp = 0;  // RMS over positions of p_B(next) - p_A(next) (llama.cpp's "RMS Δp")
};
using Fidelity = FidelityAccumulator::Result;

// Where the corpus comes from: an ids file, a text file (encoded with the
// tokenizer next to the model), or else `tokens` pseudo-random ids.
struct CorpusSpec {
  std::filesystem::path ids_file, text_file;
  int64_t tokens = 1024;  // length of the pseudo-random corpus
  uint64_t seed = 0;      // ... and its seed
  int64_t limit = 0;      // use only the first `limit` ids of a file corpus; 0 = all

  // Throws Error for an id outside [0, vocab) or a missing tokenizer.
  std::vector<int64_t> load(int64_t vocab, const std::filesystem::path& tokenizer_dir, std::string* description) const;
};

struct CompareReport {
  std::string a_name, b_name;
  bool a_is_reference = false;
  std::string corpus;  // where the ids came from
  int64_t corpus_tokens = 0, windows = 0;
  CompareOptions options;
  Fidelity fidelity;
  int64_t greedy_prompt = 0;   // tokens actually used
  int64_t greedy_tokens = 0;   // continuation length (0 = not run)
  int64_t greedy_agree = 0;    // generated tokens equal before the first difference
  double seconds = 0;
};

// Compares b against a over `corpus` (ids must be inside both vocabularies).
CompareReport compare_sources(LogitSource& a, LogitSource& b, std::span<const int64_t> corpus,
                              const CompareOptions& options);

nlohmann::json to_json(const CompareReport& r);
std::string to_markdown(const CompareReport& r);  // a metric | value table

// ---- the depth study ----------------------------------------------------------------
// The same model width synthesized at several depths, each built twice (A and
// B build flags), A and B compared on the same corpus: how does the difference
// between two graph variants grow with the number of layers?

struct DepthStudyOptions {
  std::vector<int64_t> depths;  // e.g. 24, 36, 48 (rounded by set_num_layers' 3:1 pattern rules)
  std::string preset = "tiny";
  // The two builds (normalized_build_options; the caller parses them, e.g.
  // tools/build_flags.h), and the flags they came from, for the report.
  BuildOptions build_a, build_b;
  std::string flags_a, flags_b;  // e.g. "--precision fp16 --norm-upcast"
  uint64_t seed = 0;             // synthetic weights
  // Where checkpoints and models go; empty = a temp folder removed at the end.
  // Checkpoints in a given work dir are kept and reused by later studies with
  // the same preset, depth and seed.
  std::filesystem::path work_dir;
  bool keep = false;  // keep the built models too (needs work_dir)
};

struct DepthRow {
  int64_t layers = 0;
  int64_t nodes_a = 0, nodes_b = 0;
  CompareReport report;
};

std::vector<DepthRow> run_depth_study(const DepthStudyOptions& study, const CompareOptions& options,
                                      const CorpusSpec& corpus);

nlohmann::json to_json(const std::vector<DepthRow>& rows, const DepthStudyOptions& study);
std::string to_markdown(const std::vector<DepthRow>& rows, const DepthStudyOptions& study);

}  // namespace deltagen::measure
