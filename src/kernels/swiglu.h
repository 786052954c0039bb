// The SwiGLU of Qwen3.5's MLP, on the output of its fused gate_up projection:
//   out[r, j] = silu(x[r, j]) * x[r, k + j]      x: [rows, 2k] = [gate | up], out: [rows, k]
// deltagen.MatMulNBits applies it to its A input when the load-time rewrite
// folded the Split -> Sigmoid -> Mul -> Mul in front of down_proj into it.
#pragma once
#include <cstdint>

#include "kernels/cpu_features.h"

namespace deltagen::kernels {

void swiglu(const float* x, int64_t rows, int64_t k, float* out, KernelLevel level = default_level());

// The AVX-512 build of the loop (swiglu_avx512.cpp), for the dispatcher.
void swiglu_avx512(const float* x, int64_t rows, int64_t k, float* out);

}  // namespace deltagen::kernels
