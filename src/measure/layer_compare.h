// deltagen compare --layers: where does model B's forward pass leave model
// A's? Both are teacher-forced with the same ids (the windows and chunks of
// compare.h) and the residual stream is compared after every layer, as
// llama.cpp's eval callback or gemma.cpp's activations observer would let one
// do by hand. A is the baseline: the float64 reference, or --a.
//
// Rows: "embeddings" (hidden_states.0), one per decoder layer (the stream
// after it, before the final norm for the last one), and "logits". Per row,
// over every position of every window:
//   max |B - A|, mean |B - A|        over all elements
//   relative error ||B - A|| / ||A|| (Frobenius norms over all elements)
//   cosine                           mean and min over positions of cos(A_t, B_t)
//   growth                           rel[k] / max(rel[k - 1], noise floor)
//
// The first diverging row: the first whose relative error is at least the
// noise floor and either grew by the jump factor over the row before (a
// sudden break: a wrong weight, a broken kernel) or reached the threshold (a
// slow drift that has become large). With the defaults (floor 1e-3, jump 10,
// threshold 0.5) an fp32 or fp16 build has none, one layer with a bad weight
// is named exactly, and a build whose embedding table is already 10 % off
// (int4) is named at "embeddings": that is where it starts to differ.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "measure/compare.h"

namespace deltagen::measure {

struct DivergenceRule {
  double jump_factor = 10;     // --jump-factor: growth over the previous row that counts as a jump
  double rel_threshold = 0.5;  // --rel-threshold: a relative error that counts as diverged by itself
  double noise_floor = 1e-3;   // --noise-floor: relative errors below it never count
};

void validate(const DivergenceRule& rule);

// The differences of one row, accumulated position by position.
class DiffAccumulator {
 public:
  // One position's vector of B and of the baseline A.
  void add(const double* b, const double* a, int64_t n);
  struct Result;
  Result result() const;

 private:
  double max_abs_ = 0, sum_abs_ = 0, sq_diff_ = 0, sq_a_ = 0, cos_sum_ = 0, cos_min_ = 1;
  int64_t elements_ = 0, positions_ = 0;
};

struct DiffAccumulator::Result {
  int64_t positions = 0;
  double max_abs_diff = 0, mean_abs_diff = 0;
  double rel_error = 0;  // ||B - A|| / ||A||; inf when A is all zeros and B is not
  double cos_mean = 1, cos_min = 1;
};

struct LayerRow {
  std::string name;  // "embeddings", "layer 3", "logits"
  std::string kind;  // "embeddings", "linear_attention", "full_attention", "logits"
  std::string output;  // the graph output: hidden_states.K, logits
  DiffAccumulator::Result diff;
  double growth = 0;  // rel_error / max(previous row's, noise floor)
};

struct LayerReport {
  std::string a_name, b_name, corpus;
  bool a_is_reference = false;
  int64_t corpus_tokens = 0, windows = 0, positions = 0;
  CompareOptions options;
  DivergenceRule rule;
  std::vector<LayerRow> rows;
  int64_t first_divergent = -1;  // index into rows; -1 = none
  std::string reason;            // "jump" | "threshold" (when first_divergent >= 0)
  double seconds = 0;
};

// Compares b against the baseline a over `corpus`; both must keep layers
// (LogitSource::layers()) and have the same depth and width.
LayerReport compare_layers(LogitSource& a, LogitSource& b, std::span<const int64_t> corpus,
                           const CompareOptions& options, const DivergenceRule& rule = {});

// Applies the rule to the rows (sets growth, first_divergent, reason).
void find_divergence(LayerReport& r);

nlohmann::json to_json(const LayerReport& r);
std::string to_markdown(const LayerReport& r);  // one table row per layer, then the verdict

}  // namespace deltagen::measure
