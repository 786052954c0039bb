// Graph weights computed from checkpoint tensors. Each returns a lazy
// Initializer: the checkpoint is read (and the tensor converted, transposed
// or quantized) only when the model is written, one tensor at a time,
// straight from the memory map, whose pages are dropped again afterwards so
// that a build's memory stays near the size of the largest output tensor.
// `ckpt` must outlive the write.
#pragma once
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "graph/graph_builder.h"
#include "quant/block_quant.h"
#include "quant/quant_methods.h"

namespace deltagen {

// Element-wise changes applied while converting.
enum class ValueMap {
  Identity,
  PlusOne,  // 1 + w: Qwen3.5's offset RMSNorm weight, folded so a plain RMSNorm applies it
  NegExp,   // -exp(w): the Gated DeltaNet decay rate from A_log
};

// The tensor with its checkpoint shape, values mapped, stored as `dtype`
// (float, float16 or bfloat16).
graph::Initializer float_weight(const Checkpoint& ckpt, const std::string& tensor, const std::string& name,
                                graph::DataType dtype, ValueMap map = ValueMap::Identity);

// Linear weights [N_i, K] stacked along N (one fused projection when there
// are several) and transposed to the [K, sum N_i] that MatMul multiplies by.
graph::Initializer matmul_weight(const Checkpoint& ckpt, const std::vector<std::string>& tensors,
                                 const std::string& name, graph::DataType dtype, int threads);

// The initializers of one MatMulNBits weight: linear weights [N_i, K] stacked
// along N and block-quantized (quant/block_quant.h) by the method of `fit`
// (quant/quant_methods.h). They share one quantization pass, run when the
// first of them is written.
struct QuantizedWeight {
  graph::Initializer packed;       // uint8 [N, blocks, block_bytes]   "<name>_Q4" / "_Q8"
  graph::Initializer scales;       // [N, blocks] in scale_dtype        "<name>_scales"
  graph::Initializer zero_points;  // uint8, only when asymmetric       "<name>_zero_points"
  int64_t n = 0, k = 0;
};
QuantizedWeight quantized_weight(const Checkpoint& ckpt, const std::vector<std::string>& tensors,
                                 const std::string& name, const quant::BlockFormat& format,
                                 graph::DataType scale_dtype, int threads, const quant::FitOptions& fit = {});

// The first `rows` rows of a weight stored row-major along its first
// dimension (a MatMulNBits weight's packed bytes, scales or zero points,
// whose rows are output features), under `name`; produced from `w`.
graph::Initializer first_rows(const graph::Initializer& w, int64_t rows, const std::string& name);
// The first `columns` columns of a [K, N] MatMul weight, under `name`.
graph::Initializer first_columns(const graph::Initializer& w, int64_t columns, const std::string& name);
// A MatMulNBits weight's first n output rows (its initializers renamed with `suffix`).
QuantizedWeight first_rows(const QuantizedWeight& w, int64_t n, const std::string& suffix);

// A small weight computed at build time, stored as `dtype`.
graph::Initializer computed_weight(const std::string& name, const std::vector<int64_t>& dims,
                                   std::vector<float> values, graph::DataType dtype);

// fp32 values -> the bytes of a float / float16 / bfloat16 tensor.
graph::WeightBuffer to_weight_buffer(std::vector<float> values, graph::DataType dtype);

}  // namespace deltagen
