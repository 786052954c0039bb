// BuildOptions' precisions resolved into what each part of the graph
// stores and computes in.
#pragma once
#include <cstdint>
#include <string>

#include "graph/graph_builder.h"
#include "models/build_options.h"
#include "quant/block_quant.h"

namespace deltagen {

// How one group of projection weights is stored.
struct WeightFormat {
  bool quantized = false;
  graph::DataType float_dtype = graph::kFloat;  // when not quantized
  quant::BlockFormat block;                     // when quantized
};

struct PrecisionPlan {
  graph::DataType activations = graph::kFloat;
  graph::DataType state = graph::kFloat;  // linear-attention conv + recurrent state
  WeightFormat layers;       // attention and MLP projections
  WeightFormat linear_attn;  // Gated DeltaNet projections
  WeightFormat lm_head;      // and a tied embedding
  int64_t accuracy_level = 4;
};

// Validates the precision options and resolves them; throws Error.
PrecisionPlan plan_precision(const BuildOptions& opts);

}  // namespace deltagen
