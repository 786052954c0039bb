// swiglu's loop compiled with the AVX-512 flags (CMakeLists.txt): the
// compiler vectorizes silu_of (vector_math.h) 16 lanes wide.
#include "kernels/vector_math.h"
#include "kernels/swiglu.h"

namespace deltagen::kernels {

void swiglu_avx512(const float* x, int64_t rows, int64_t k, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x + r * 2 * k;
    const float* up = gate + k;
    float* o = out + r * k;
    for (int64_t j = 0; j < k; ++j) o[j] = silu_of(gate[j]) * up[j];
  }
}

}  // namespace deltagen::kernels
