// attention_impl.h compiled with the AVX-512 flags (CMakeLists.txt), with
// the two inner blocks written out: the compiler's versions of the same loops
// kept their accumulators in memory and ran slower than the baseline build.
// Reached only through kAttentionFamily, when this CPU has AVX-512.
// GCC 12's AVX-512 intrinsic headers trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593); nothing here is uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/attention_impl.h"

namespace deltagen::kernels {
namespace {

// The 16 partials of score() are lanes here (one register per key) or
// registers (one lane per key, 16 keys at once); both sum them in the same
// tree and use FMA for the same products, so a row's scores are the same bits
// either way.
inline float tree_sum16_avx512(__m512 p) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(p), _mm512_extractf32x8_ps(p, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));  // [s4[0] + s4[2], s4[1] + s4[3]]
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// Partial sums of q . k over d = l, l+16, ... (lane l), in d order.
inline __m512 partials(const float* q, const float* k, int64_t hd) {
  __m512 acc = _mm512_setzero_ps();
  int64_t d = 0;
  for (; d + kLanes <= hd; d += kLanes) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), _mm512_loadu_ps(k + d), acc);
  if (d < hd) {
    const __mmask16 tail = __mmask16((1u << (hd - d)) - 1u);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + d), _mm512_maskz_loadu_ps(tail, k + d), acc);
  }
  return acc;
}

void scores_few_avx512(const float* q, int64_t nq, int64_t hd, const float* keys, int64_t n_max, float scale,
                       const int64_t* limit, float* scores, int64_t ld) {
  for (int64_t j = 0; j < n_max; ++j)
    for (int64_t r = 0; r < nq; ++r)
      if (j < limit[r]) scores[r * ld + j] = tree_sum16_avx512(partials(q + r * hd, keys + j * hd, hd)) * scale;
}

void scores_block_avx512(const float* q, int64_t nq, int64_t hd, const float* kt, float scale, const int64_t* limit,
                         int64_t j0, float* scores, int64_t ld) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t r = 0; r < nq; ++r) {
    if (j0 >= limit[r]) continue;
    const float* qr = q + r * hd;
    __m512 acc[kLanes];  // acc[m]: partial m of the 16 keys (registers: every index is a constant)
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int64_t d0 = 0; d0 < hd; d0 += kLanes) {
#pragma GCC unroll 16
      for (int m = 0; m < kLanes; ++m)
        if (d0 + m < hd)
          acc[m] = _mm512_fmadd_ps(_mm512_set1_ps(qr[d0 + m]), _mm512_loadu_ps(kt + (d0 + m) * kLanes), acc[m]);
    }
    for (int m = 0; m < 8; ++m) acc[m] = _mm512_add_ps(acc[m], acc[m + 8]);
    for (int m = 0; m < 4; ++m) acc[m] = _mm512_add_ps(acc[m], acc[m + 4]);
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3]));
    _mm512_storeu_ps(scores + r * ld + j0, _mm512_mul_ps(sum, vscale));
  }
}

// R rows (1-4), each with the same FMAs whatever R is: a row's sum does not
// depend on how many rows shared its block.
template <int R>
void pv_rows(const float* scores, int64_t ld, int64_t n, const float* values, int64_t hd, float (*block)[64]) {
  __m512 acc[R][4];
  for (auto& row : acc)
    for (auto& a : row) a = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const float* value = values + j * hd;
    const __m512 v0 = _mm512_loadu_ps(value), v1 = _mm512_loadu_ps(value + 16), v2 = _mm512_loadu_ps(value + 32),
                 v3 = _mm512_loadu_ps(value + 48);
    for (int rr = 0; rr < R; ++rr) {
      const __m512 p = _mm512_set1_ps(scores[rr * ld + j]);
      acc[rr][0] = _mm512_fmadd_ps(p, v0, acc[rr][0]);
      acc[rr][1] = _mm512_fmadd_ps(p, v1, acc[rr][1]);
      acc[rr][2] = _mm512_fmadd_ps(p, v2, acc[rr][2]);
      acc[rr][3] = _mm512_fmadd_ps(p, v3, acc[rr][3]);
    }
  }
  for (int rr = 0; rr < R; ++rr)
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(block[rr] + 16 * c, acc[rr][c]);
}

void pv_block_avx512(const float* scores, int64_t ld, int64_t rows, int64_t n, const float* values, int64_t hd,
                     int64_t dims, float (*block)[64]) {
  if (dims != 64) return pv_block_loops(scores, ld, rows, n, values, hd, dims, block);
  switch (rows) {
    case 4: return pv_rows<4>(scores, ld, n, values, hd, block);
    case 3: return pv_rows<3>(scores, ld, n, values, hd, block);
    case 2: return pv_rows<2>(scores, ld, n, values, hd, block);
    default: return pv_rows<1>(scores, ld, n, values, hd, block);
  }
}

void attend_avx512(const AttentionTask& task) { attend(task, scores_block_avx512, scores_few_avx512, pv_block_avx512); }

}  // namespace

const AttentionKernels kAttentionAvx512{KernelLevel::Avx512, attend_avx512};

}  // namespace deltagen::kernels
