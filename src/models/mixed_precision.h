// --bits-budget: which groups of projections get more bits, chosen by their
// measured effect on the model's predictions.
//
// A site is a group of projections that read one input (calibration.h); the
// graph fuses them, so they share one format. For each site, the study
// quantizes it alone at the build's int4 format (with the build's method),
// reruns the float64 reference from that site's layer on the calibration
// text's first tokens and measures the mean KL of the next-token distribution
// against the unquantized model: the site's measured sensitivity. The other
// formats a site can take (int4 at coarser blocks, int8) are scored as that
// KL times the ratio of their importance-weighted reconstruction errors to
// the int4 one's. Sites are then given the formats that minimize the sum of
// KLs within the budget (a Lagrangian over bytes: each site picks the format
// minimizing KL + lambda * bytes, lambda the smallest that fits; what budget
// that leaves goes to the upgrades with the most KL removed per byte).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/calibration.h"
#include "models/precision_plan.h"

namespace deltagen {

struct MixedPlanOptions {
  double bits_budget = 0;       // average bits per quantized weight, scales and zero points included
  quant::BlockFormat base;      // the build's int4 format
  quant::QuantMethod method = quant::QuantMethod::Rtn;
  quant::ScaleStorage scales = quant::ScaleStorage::F32;
  int scale_bytes = 4;          // bytes of one stored scale
  int64_t eval_tokens = 128;    // calibration tokens the KL is measured on
  // What the budget averages over: the weights one decoded token reads (every
  // site whole, one row of the embedding table) or the weights the file
  // stores (the sites, and the embedding table whole when it is not the
  // head's own weight).
  bool budget_per_read = true;
  // The embedding table [rows, cols] beside the sites (rows = 0: the graph
  // has none). Shared: it is the head site's weight (a tied table). Its
  // format: `embedding_format` when fixed (--embedding, a float gather),
  // else the head site's.
  int64_t embedding_rows = 0, embedding_cols = 0;
  bool embedding_shared = false;
  std::optional<WeightFormat> embedding_format;
  int threads = 0;
  bool progress = false;
};

struct SiteFormat {
  WeightFormat format;
  int64_t bytes = 0;          // stored
  int64_t counted_bytes = 0;  // what the budget counts: the head's with the embedding it brings
  double kl = 0;  // measured (the int4 base) or scaled by reconstruction error
};

struct SitePlan {
  std::vector<std::string> weights;
  int64_t params = 0;
  std::vector<SiteFormat> candidates;  // [0] = the int4 base format
  size_t chosen = 0;
};

struct MixedPlan {
  std::vector<SitePlan> sites;
  bool budget_per_read = true;
  double bits_per_weight = 0;  // as the budget counts it
  double predicted_kl = 0;  // sum of the chosen formats' KLs
};

// Runs the study on `model` (its weights are swapped and restored). Throws
// Error("--bits-budget") when even the smallest plan exceeds the budget.
MixedPlan plan_mixed_precision(ReferenceModel& model, const Calibration& cal, const std::vector<int64_t>& ids,
                               const MixedPlanOptions& o);

std::string format_label(const WeightFormat& f);  // "int4/b32/sym"
nlohmann::json to_json(const MixedPlan& plan);

}  // namespace deltagen
