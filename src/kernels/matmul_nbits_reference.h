// Scalar references for MatMulNBits, straight from the file layout (no
// packing), for tests and the benchmark's correctness check:
//   dequantize_reference: w[n][k] as fp32;
//   matmul_reference:     Y = A · wᵀ (+ bias) in double, the "exact" result;
//   matmul_reference_q8:  the int8-activation semantics (accuracy_level 4) the
//                         dot-product kernels implement, with the same
//                         quantization of A, so kernels can be held to ~1e-6.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/packed_weights.h"

namespace deltagen::kernels {

std::vector<float> dequantize_reference(const NBitsWeightsView& w);  // N x K

void matmul_reference(const NBitsWeightsView& w, const float* a, int64_t m, const float* bias, float* y);

// `scale_rounding_f16`: round each weight scale through fp16 first, as
// PackedWeights does with compact scales.
void matmul_reference_q8(const NBitsWeightsView& w, const float* a, int64_t m, const float* bias, float* y,
                         bool scale_rounding_f16);

}  // namespace deltagen::kernels
