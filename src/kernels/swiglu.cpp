#include "kernels/swiglu.h"

#include <algorithm>
#include <cstring>

#include "kernels/vector_math.h"

namespace deltagen::kernels {

void swiglu(const float* x, int64_t rows, int64_t k, float* out, KernelLevel level) {
  if (std::min(level, supported_level()) >= KernelLevel::Avx512) return swiglu_avx512(x, rows, k, out);
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x + r * 2 * k;
    float* o = out + r * k;
    std::memcpy(o, gate, size_t(k) * sizeof(float));
    silu_inplace(o, k);  // SSE2: baseline x86-64 leaves the plain loop scalar
    for (int64_t j = 0; j < k; ++j) o[j] *= gate[k + j];
  }
}

}  // namespace deltagen::kernels
