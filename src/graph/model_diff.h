// `deltagen inspect A --diff B`: what changed between two models, as the
// node-count tables of upstream change descriptions show it (per op type:
// count in A, count in B, delta), plus totals and weight bytes.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "graph/model_summary.h"

namespace deltagen::graph {

struct CountDelta {
  int64_t a = 0, b = 0;
  int64_t delta() const { return b - a; }
};

struct ModelDiff {
  ModelSummary a, b;
  std::map<std::string, CountDelta> op_counts;  // every op type of either model
  CountDelta nodes, weight_bytes, initializers, inputs, outputs;
};

ModelDiff diff_models(const ModelSummary& a, const ModelSummary& b);

// Changed op types first (largest |delta| first, then by name), then the unchanged ones.
std::string diff_text(const ModelDiff& d);
nlohmann::json diff_json(const ModelDiff& d);

}  // namespace deltagen::graph
