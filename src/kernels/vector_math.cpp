// The out-of-line part of vector_math.h, compiled for baseline x86-64 only
// (never with the per-ISA flags: see the header for why).
#include "kernels/vector_math.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace deltagen::kernels {

// v <- v * sigmoid(g) over a contiguous run, four at a time with SSE2 (part
// of baseline x86-64; GCC would not vectorize the clamps by itself), the
// same arithmetic as exp_for_silu. g may be v itself (SiLU).
void mul_sigmoid(float* v, const float* g, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128 hi = _mm_set1_ps(87.0f), lo = _mm_set1_ps(-88.0f), log2e = _mm_set1_ps(1.44269504088896341f);
  const __m128 round = _mm_set1_ps(12582912.0f), ln2_hi = _mm_set1_ps(0.693145751953125f);
  const __m128 ln2_lo = _mm_set1_ps(1.42860682030941723212e-6f), one = _mm_set1_ps(1.0f);
  const float coeff[] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};
  for (; i + 4 <= n; i += 4) {
    __m128 x = _mm_min_ps(_mm_max_ps(_mm_loadu_ps(g + i), lo), hi);  // exp(-g): clamp g to [-88, 87]
    x = _mm_sub_ps(_mm_setzero_ps(), x);
    const __m128 nf = _mm_sub_ps(_mm_add_ps(_mm_mul_ps(x, log2e), round), round);
    const __m128 r = _mm_sub_ps(_mm_sub_ps(x, _mm_mul_ps(nf, ln2_hi)), _mm_mul_ps(nf, ln2_lo));
    __m128 p = _mm_set1_ps(coeff[0]);
    for (int c = 1; c < 7; ++c) p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(coeff[c]));
    const __m128i bits = _mm_slli_epi32(_mm_add_epi32(_mm_cvtps_epi32(nf), _mm_set1_epi32(127)), 23);
    const __m128 e = _mm_mul_ps(p, _mm_castsi128_ps(bits));
    _mm_storeu_ps(v + i, _mm_div_ps(_mm_loadu_ps(v + i), _mm_add_ps(one, e)));
  }
#endif
  for (; i < n; ++i) v[i] = v[i] / (1.0f + exp_for_silu(-g[i]));
}

void silu_inplace(float* v, int64_t n) { mul_sigmoid(v, v, n); }

}  // namespace deltagen::kernels
