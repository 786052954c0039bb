// RMSNorm of rows, after an optional residual add: what ORT's
// SimplifiedLayerNormalization (skip null) and com.microsoft
// SkipSimplifiedLayerNormalization compute in float:
//   sum = x + skip;  out = sum * gamma / sqrt(mean(sum^2) + epsilon)
// deltagen.MatMulNBits applies it to its A input when the load-time rewrite
// folded the norm in front of a projection into it (rmsnorm_fusion.h): a
// decode step then runs 49 fewer ONNX nodes in Qwen3.5-0.8B.
#pragma once
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace deltagen::kernels {

// x, skip (may be null), sum (may be null; written when given), out: [rows, k].
// out may be x itself (in place) when there is no skip; otherwise no aliasing.
void rms_norm_rows(const float* x, const float* skip, const float* gamma, int64_t rows, int64_t k, float epsilon,
                   float* sum, float* out, const Parallel& parallel, KernelLevel level = default_level());

// The per-ISA table (dispatch.h): one row.
struct RmsNormKernels {
  KernelLevel isa;
  void (*row)(const float* x, const float* skip, const float* gamma, int64_t k, float epsilon, float* sum, float* out);
};
// rms_norm.cpp, baseline x86-64. It serves every level: a row is one pass
// over k floats that memory bounds, and a build with FMA or another
// summation width would change the bits of every norm.
extern const RmsNormKernels kRmsNormScalar;
extern const KernelFamily<RmsNormKernels> kRmsNormFamily;

}  // namespace deltagen::kernels
