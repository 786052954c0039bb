// BuildOptions' precisions resolved into what each part of the graph
// stores and computes in.
#pragma once
#include <cstdint>
#include <optional>
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
  // --embedding: the table's own format; none = the lm_head's (a float table
  // in the activation dtype with --embedding-gather float).
  std::optional<WeightFormat> embedding;
  int64_t accuracy_level = 4;
};

// Validates the precision options and resolves them; throws Error.
PrecisionPlan plan_precision(const BuildOptions& opts);

bool same_format(const WeightFormat& a, const WeightFormat& b);
// Whether a tied checkpoint's one table becomes two in this build: --embedding
// asks a format other than the lm_head's (as planned before --bits-budget),
// and the graph has both an embedding and an lm_head.
bool splits_tied_table(const PrecisionPlan& plan, const BuildOptions& opts);

}  // namespace deltagen
