// The activation quantizer (quantize_activations.h) with AVX2 (compiled with
// the AVX2 flags, CMakeLists.txt; reached only through kQuantizeFamily, when
// the CPU has them): the same bits as the portable block, 8 values per step.
// It runs before every decode GEMV on one thread, so on an AVX2 machine the
// portable loop was ~0.7 ms of a 0.8B decode step (quantize_activations.h).
#include <immintrin.h>

#include "kernels/quantize_activations.h"

namespace deltagen::kernels {
namespace {

inline float max_lane(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int32_t sum_lanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// n a multiple of 8.
void quantize_block_avx2(const float* src, int64_t n, int8_t* dst, float* scale, int32_t* sum) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 vmax = _mm256_setzero_ps();
  // MAXPS returns its second operand when either is NaN: a NaN input leaves
  // the running max alone, as std::max(amax, NaN) does in the portable block.
  for (int64_t i = 0; i < n; i += 8) vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(src + i), abs_mask), vmax);
  const float amax = max_lane(vmax);
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  __m256i total = _mm256_setzero_si256();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(src + i), vinv);
    // Round to nearest even (MXCSR's default), NaN -> 0, then clamp as the portable block.
    const __m256i number = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_ORD_Q));
    const __m256i rounded = _mm256_and_si256(_mm256_cvtps_epi32(x), number);
    const __m256i q = _mm256_min_epi32(_mm256_max_epi32(rounded, lo), hi);
    const __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + i), _mm_packs_epi16(q16, q16));
    total = _mm256_add_epi32(total, q);
  }
  *scale = amax / 127.0f;
  *sum = sum_lanes(total);
}

void quantize_row_avx2(const float* src, int64_t k, int block_size, int8_t* dst, float* scales, int32_t* sums) {
  quantize_row_with(quantize_block_avx2, 8, src, k, block_size, dst, scales, sums);
}

}  // namespace

const QuantizeKernels kQuantizeAvx2{KernelLevel::Avx2, quantize_row_avx2};

}  // namespace deltagen::kernels
