// Small MatMulNBits-only ONNX models for tests and benchmarks: input A [M, K]
// (M symbolic) feeding one com.microsoft.MatMulNBits node per weight set, each
// with its own initializers and output Y<i> [M, N_i]. Several nodes over
// distinct weights make a decode-like stream that no cache holds.
#pragma once
#include <filesystem>
#include <vector>

#include <onnx/onnx_pb.h>

#include "kernels/packed_weights.h"

namespace deltagen::graph {

struct MatMulNBitsNode {
  kernels::NBitsWeightsView weights;  // all nodes must share K
  const float* bias = nullptr;        // N floats or null
};

onnx::ModelProto matmul_nbits_model(const std::vector<MatMulNBitsNode>& nodes, int64_t accuracy_level);

// Writes `model` to `model_path` with every initializer moved to
// "<model file name>.data" beside it (page-aligned offsets, as the builder does).
void save_with_external_data(onnx::ModelProto model, const std::filesystem::path& model_path);

}  // namespace deltagen::graph
