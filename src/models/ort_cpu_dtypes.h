// Which dtypes ONNX Runtime 1.30's CPU execution provider runs each op in,
// measured with one-node models (tests/ort_cpu_dtypes_test.cpp checks every
// entry against the library), and the dtype the builder therefore gives
// each op of a graph whose activations are fp16 or bf16.
#pragma once
#include <string>
#include <vector>

#include "graph/graph_builder.h"

namespace deltagen {

enum class CpuKernel {
  Native,       // a kernel for this dtype exists
  OrtFallback,  // no kernel, but ORT inserts Casts to fp32 around the node itself (fp16 only)
  Missing,      // no kernel and no fallback: the session fails to load
};

// For dtype float16 or bfloat16 (float is always Native).
CpuKernel cpu_kernel(const std::string& op_type, graph::DataType dtype);

// The ops the table knows (its test iterates over them).
const std::vector<std::string>& cpu_kernel_ops();

// The dtype `op_type` runs in when the activations are `activations`:
// the activation dtype where the CPU EP takes it (natively or through ORT's
// own fp16 fallback, which keeps the graph identical to upstream's q4f16),
// else fp32 with the builder's explicit Casts. LinearAttention and
// CausalConvWithState always run in fp32: their kernels are float-only and
// the recurrent state they share is fp32 by default.
graph::DataType cpu_compute_dtype(const std::string& op_type, graph::DataType activations);

}  // namespace deltagen
