// swiglu's loop for the per-ISA files (swiglu_avx2.cpp, swiglu_avx512.cpp,
// compiled with those flags): the compiler vectorizes silu_of
// (vector_math.h) 8 or 16 lanes wide. Internal linkage, so each file keeps
// its own copy.
#pragma once
#include <cstdint>

#include "kernels/swiglu.h"
#include "kernels/vector_math.h"

namespace deltagen::kernels {
namespace {

inline void swiglu_rows_vectorized(const float* x, int64_t rows, int64_t k, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x + r * 2 * k;
    const float* up = gate + k;
    float* o = out + r * k;
    for (int64_t j = 0; j < k; ++j) o[j] = silu_of(gate[j]) * up[j];
  }
}

}  // namespace
}  // namespace deltagen::kernels
