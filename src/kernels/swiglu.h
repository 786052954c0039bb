// The SwiGLU of Qwen3.5's MLP, on the output of its fused gate_up projection:
//   out[r, j] = silu(x[r, j]) * x[r, k + j]      x: [rows, 2k] = [gate | up], out: [rows, k]
// deltagen.MatMulNBits applies it to its A input when the load-time rewrite
// folded the Split -> Sigmoid -> Mul -> Mul in front of down_proj into it.
#pragma once
#include <cstdint>

#include "kernels/dispatch.h"

namespace deltagen::kernels {

void swiglu(const float* x, int64_t rows, int64_t k, float* out, KernelLevel level = default_level());

// The per-ISA table (dispatch.h).
struct SwigluKernels {
  KernelLevel isa;
  void (*rows)(const float* x, int64_t rows, int64_t k, float* out);
};
extern const SwigluKernels kSwigluScalar;  // swiglu.cpp (baseline x86-64, SSE2)
extern const SwigluKernels kSwigluAvx2;    // swiglu_avx2.cpp
extern const SwigluKernels kSwigluAvx512;  // swiglu_avx512.cpp
extern const KernelFamily<SwigluKernels> kSwigluFamily;  // AMX: the AVX-512 table

}  // namespace deltagen::kernels
