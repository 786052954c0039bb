// Graph weights of a MoE layer's routed experts, stacked [E, N, K] as
// com.microsoft MoE / QMoE read them (N outputs, K inputs per expert), from
// either checkpoint layout (checkpoint.h ExpertLayout). Like weights.h they
// are lazy: an expert's rows are read from the memory map, converted or
// quantized and their pages dropped only when the model is written, one
// initializer at a time.
//
// fc1 holds each expert's gate and up rows interleaved (gate row 0, up row 0,
// gate row 1, ...): ONNX Runtime's CPU kernels take SwiGLU's two halves only
// in this order (swiglu_fusion = 1). fc2 is the down projection [E, H, I].
#pragma once
#include <cstdint>
#include <string>

#include "checkpoint/checkpoint.h"
#include "graph/graph_builder.h"
#include "models/weights.h"
#include "quant/block_quant.h"

namespace deltagen {

enum class ExpertFc { Fc1GateUp, Fc2Down };

// [E, N, K] float weights in `dtype`.
graph::Initializer expert_float_weight(const Checkpoint& ckpt, int64_t layer, ExpertFc fc, const std::string& name,
                                       graph::DataType dtype);

// [E, N, K * bits / 8] packed codes (MatMulNBits' row layout: low nibble
// first, symmetric codes around 2^(bits-1)) and [E, N, K / block] scales.
QuantizedWeight expert_quantized_weight(const Checkpoint& ckpt, int64_t layer, ExpertFc fc, const std::string& name,
                                        const quant::BlockFormat& format, graph::DataType scale_dtype, int threads);

}  // namespace deltagen
