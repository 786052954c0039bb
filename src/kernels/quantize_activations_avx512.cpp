// The activation quantizer (quantize_activations.h) with AVX-512 (compiled
// with the AVX-512 flags, CMakeLists.txt; reached only through
// kQuantizeFamily, when the CPU has them): the same bits as the portable
// block, 16 values per step.
// GCC 12's AVX-512 intrinsic headers trip -W(maybe-)uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593); nothing is uninitialized.
// (-Wuninitialized too: the -O1 sanitizer build reports them that way.)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/quantize_activations.h"

namespace deltagen::kernels {
namespace {

void quantize_block_avx512(const float* src, int64_t n, int8_t* dst, float* scale, int32_t* sum) {
  __m512 vmax = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) vmax = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(src + i)), vmax);
  const float amax = _mm512_reduce_max_ps(vmax);
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  __m512i total = _mm512_setzero_si512();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(src + i), vinv);
    const __mmask16 number = _mm512_cmp_ps_mask(x, x, _CMP_ORD_Q);  // NaN -> 0
    // Round to nearest even (MXCSR's default), then clamp as the portable block.
    const __m512i q = _mm512_min_epi32(_mm512_max_epi32(_mm512_maskz_cvtps_epi32(number, x), lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm512_cvtepi32_epi8(q));
    total = _mm512_add_epi32(total, q);
  }
  *scale = amax / 127.0f;
  *sum = _mm512_reduce_add_epi32(total);
}

void quantize_row_avx512(const float* src, int64_t k, int block_size, int8_t* dst, float* scales, int32_t* sums) {
  quantize_row_with(quantize_block_avx512, 16, src, k, block_size, dst, scales, sums);
}

}  // namespace

const QuantizeKernels kQuantizeAvx512{KernelLevel::Avx512, quantize_row_avx512};

}  // namespace deltagen::kernels
