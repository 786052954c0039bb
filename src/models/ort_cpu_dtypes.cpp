#include "models/ort_cpu_dtypes.h"

#include <map>
#include <stdexcept>

namespace deltagen {
namespace {

struct Support {
  CpuKernel fp16, bf16;
};

// Measured on libonnxruntime.so.1 1.30.0 (CPU EP, x86-64).
const std::map<std::string, Support>& table() {
  using K = CpuKernel;
  static const std::map<std::string, Support> t = {
      // Data movement and the RMSNorm kernels: every float type.
      {"Cast", {K::Native, K::Native}},
      {"Gather", {K::Native, K::Native}},
      {"Reshape", {K::Native, K::Native}},
      {"Shape", {K::Native, K::Native}},
      {"Slice", {K::Native, K::Native}},
      {"Split", {K::Native, K::Native}},
      {"Transpose", {K::Native, K::Native}},
      {"SimplifiedLayerNormalization", {K::Native, K::Native}},
      {"SkipSimplifiedLayerNormalization", {K::Native, K::Native}},
      // com.microsoft kernels with float + float16 versions.
      {"GatedRMSNorm", {K::Native, K::Missing}},
      {"GatherBlockQuantized", {K::Native, K::Missing}},
      {"GroupQueryAttention", {K::Native, K::Missing}},
      {"LinearAttentionGate", {K::Native, K::Missing}},
      {"MatMulNBits", {K::Native, K::Missing}},
      {"QMoE", {K::Native, K::Missing}},
      {"RotaryEmbedding", {K::Native, K::Missing}},
      // Float-only kernels.
      {"Add", {K::OrtFallback, K::Missing}},
      {"CausalConvWithState", {K::OrtFallback, K::Missing}},
      {"FusedMatMul", {K::OrtFallback, K::Missing}},
      {"LinearAttention", {K::OrtFallback, K::Missing}},
      {"LpNormalization", {K::OrtFallback, K::Missing}},
      {"MoE", {K::OrtFallback, K::Missing}},  // and see cpu_compute_dtype
      {"MatMul", {K::OrtFallback, K::Missing}},
      {"Mul", {K::OrtFallback, K::Missing}},
      {"Pad", {K::OrtFallback, K::Missing}},
      {"Reciprocal", {K::OrtFallback, K::Missing}},
      {"ReduceSum", {K::OrtFallback, K::Missing}},
      {"Sigmoid", {K::OrtFallback, K::Missing}},
      {"Softplus", {K::OrtFallback, K::Missing}},
      {"Sqrt", {K::OrtFallback, K::Missing}},
  };
  return t;
}

}  // namespace

CpuKernel cpu_kernel(const std::string& op_type, graph::DataType dtype) {
  if (dtype == graph::kFloat) return CpuKernel::Native;
  auto it = table().find(op_type);
  if (it == table().end()) throw std::logic_error("cpu_kernel: no entry for " + op_type);
  return dtype == graph::kFloat16 ? it->second.fp16 : it->second.bf16;
}

const std::vector<std::string>& cpu_kernel_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (const auto& [op, support] : table()) v.push_back(op);
    return v;
  }();
  return ops;
}

graph::DataType cpu_compute_dtype(const std::string& op_type, graph::DataType activations) {
  if (op_type == "LinearAttention" || op_type == "CausalConvWithState") return graph::kFloat;
  // fp16 MoE loads (ORT places Casts around it) but a float16 MoE node was
  // measured returning zeros on x86 (docs/moe.md): float experts run in fp32.
  if (op_type == "MoE") return graph::kFloat;
  return cpu_kernel(op_type, activations) == CpuKernel::Missing ? graph::kFloat : activations;
}

}  // namespace deltagen
