// What a quantized build fits its blocks with: the method, the calibration
// statistics it needs, and with --bits-budget a format per group of
// projections (mixed_precision.h). Prepared once before the graph is built;
// the graph asks it per (fused) weight. Its report is the build's
// quantization.json.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "models/build_options.h"
#include "models/calibration.h"
#include "models/precision_plan.h"

namespace deltagen {

struct QuantRecipe {
  quant::QuantMethod method = quant::QuantMethod::Rtn;
  std::optional<Calibration> calibration;
  std::map<std::string, WeightFormat> formats;  // by checkpoint weight (--bits-budget)
  nlohmann::json report;                        // null for a float build
  // A tied checkpoint's table split in two by --embedding (splits_tied_table):
  // the lm_head is then fitted as any other projection, not as the shared table.
  bool tied_table_split = false;

  // The format of a (stacked) weight: the mixed plan's, else `planned`.
  WeightFormat format_for(const std::vector<std::string>& tensors, const WeightFormat& planned) const;
  // How to fit it: the method, with the statistics of its input when calibrated.
  quant::FitOptions fit_for(const std::vector<std::string>& tensors, graph::DataType scale_dtype) const;
  // How to fit an embedding table that only a gather reads (no calibration input reaches it).
  quant::FitOptions fit_for_gathered_table(graph::DataType scale_dtype) const;
};

// Throws Error naming the flag for options that do not go together.
void validate_quantization_options(const BuildOptions& opts);

// Calibrates and plans as the options ask: with --calibration the checkpoint
// streams through the reference one layer at a time (streamed_calibration.h);
// with --bits-budget the whole model is loaded into the float64 reference.
// Refuses, before any slow work, a calibration predicted not to fit in memory.
QuantRecipe prepare_quantization(const Checkpoint& ckpt, const BuildOptions& opts, const PrecisionPlan& plan);

}  // namespace deltagen
