#include "kernels/swiglu.h"

#include <cstring>

#include "kernels/vector_math.h"

namespace deltagen::kernels {
namespace {

void swiglu_rows_sse2(const float* x, int64_t rows, int64_t k, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x + r * 2 * k;
    float* o = out + r * k;
    std::memcpy(o, gate, size_t(k) * sizeof(float));
    silu_inplace(o, k);  // SSE2: baseline x86-64 leaves the plain loop scalar
    for (int64_t j = 0; j < k; ++j) o[j] *= gate[k + j];
  }
}

}  // namespace

const SwigluKernels kSwigluScalar{KernelLevel::Scalar, swiglu_rows_sse2};
const KernelFamily<SwigluKernels> kSwigluFamily{"swiglu", {&kSwigluScalar, &kSwigluAvx2, &kSwigluAvx512, &kSwigluAvx512}};

void swiglu(const float* x, int64_t rows, int64_t k, float* out, KernelLevel level) {
  kSwigluFamily.at(level).rows(x, rows, k, out);
}

}  // namespace deltagen::kernels
