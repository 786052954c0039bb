// attention_impl.h compiled with the AVX2 flags (CMakeLists.txt), with the
// three inner blocks written out as attention_avx512.cpp does, at half the
// width. Reached only through kAttentionFamily, when this CPU has AVX2.
//
// The arithmetic is the AVX-512 file's, operation for operation (the same
// FMAs into the same 16 partial sums, the same summation tree), so both
// levels give a row the same bits; only the register blocking differs, to
// fit AVX2's 16 vector registers.
#include <immintrin.h>

#include "kernels/attention_impl.h"

namespace deltagen::kernels {
namespace {

// tree_sum16 (attention_impl.h) of partials 0-7 (lo) and 8-15 (hi).
inline float tree_sum16_avx2(__m256 lo, __m256 hi) {
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));  // [s4[0] + s4[2], s4[1] + s4[3]]
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// A load of the first `n` (0-8) floats at p, zeros beyond.
inline __m256 load_first(const float* p, int64_t n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), lane));
}

// score(): partials 0-7 and 8-15 of q . k over d = l, l+16, ... in d order.
inline float score_avx2(const float* q, const float* k, int64_t hd, float scale) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + kLanes <= hd; d += kLanes) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), _mm256_loadu_ps(k + d + 8), hi);
  }
  if (d < hd) {  // the masked tail of the AVX-512 file: zero lanes add 0 * 0
    const int64_t rest = hd - d, n_lo = rest < 8 ? rest : 8, n_hi = rest - n_lo;
    lo = _mm256_fmadd_ps(load_first(q + d, n_lo), load_first(k + d, n_lo), lo);
    hi = _mm256_fmadd_ps(load_first(q + d + 8, n_hi), load_first(k + d + 8, n_hi), hi);
  }
  return tree_sum16_avx2(lo, hi) * scale;
}

void scores_few_avx2(const float* q, int64_t nq, int64_t hd, const float* keys, int64_t n_max, float scale,
                     const int64_t* limit, float* scores, int64_t ld) {
  for (int64_t j = 0; j < n_max; ++j)
    for (int64_t r = 0; r < nq; ++r)
      if (j < limit[r]) scores[r * ld + j] = score_avx2(q + r * hd, keys + j * hd, hd, scale);
}

// The 16 keys of a block in two halves of 8 (one lane per key), each with
// the 16 partials in registers.
void scores_block_avx2(const float* q, int64_t nq, int64_t hd, const float* kt, float scale, const int64_t* limit,
                       int64_t j0, float* scores, int64_t ld) {
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int64_t r = 0; r < nq; ++r) {
    if (j0 >= limit[r]) continue;
    const float* qr = q + r * hd;
    for (int half = 0; half < 2; ++half) {
      __m256 acc[kLanes];  // acc[m]: partial m of 8 keys
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (int64_t d0 = 0; d0 < hd; d0 += kLanes) {
#pragma GCC unroll 16
        for (int m = 0; m < kLanes; ++m)
          if (d0 + m < hd)
            acc[m] = _mm256_fmadd_ps(_mm256_set1_ps(qr[d0 + m]), _mm256_loadu_ps(kt + (d0 + m) * kLanes + 8 * half),
                                     acc[m]);
      }
      for (int m = 0; m < 8; ++m) acc[m] = _mm256_add_ps(acc[m], acc[m + 8]);
      for (int m = 0; m < 4; ++m) acc[m] = _mm256_add_ps(acc[m], acc[m + 4]);
      const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
      _mm256_storeu_ps(scores + r * ld + j0 + 8 * half, _mm256_mul_ps(sum, vscale));
    }
  }
}

// R rows (1-4) x 16 dims starting at d0: each output is the same chain of
// FMAs over j as in pv_rows of the AVX-512 file, whatever R and d0 are.
template <int R>
void pv_rows_16(const float* scores, int64_t ld, int64_t n, const float* values, int64_t hd, int64_t d0,
                float (*block)[64]) {
  __m256 acc[R][2];
  for (auto& row : acc)
    for (auto& a : row) a = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const float* value = values + j * hd + d0;
    const __m256 v0 = _mm256_loadu_ps(value), v1 = _mm256_loadu_ps(value + 8);
    for (int rr = 0; rr < R; ++rr) {
      const __m256 p = _mm256_set1_ps(scores[rr * ld + j]);
      acc[rr][0] = _mm256_fmadd_ps(p, v0, acc[rr][0]);
      acc[rr][1] = _mm256_fmadd_ps(p, v1, acc[rr][1]);
    }
  }
  for (int rr = 0; rr < R; ++rr) {
    _mm256_storeu_ps(block[rr] + d0, acc[rr][0]);
    _mm256_storeu_ps(block[rr] + d0 + 8, acc[rr][1]);
  }
}

// 64 dims as four slices of 16: 8 accumulators for 4 rows fit in registers
// next to the value loads, where one pass over 64 dims would need 32.
template <int R>
void pv_rows(const float* scores, int64_t ld, int64_t n, const float* values, int64_t hd, float (*block)[64]) {
  for (int64_t d0 = 0; d0 < 64; d0 += 16) pv_rows_16<R>(scores, ld, n, values, hd, d0, block);
}

void pv_block_avx2(const float* scores, int64_t ld, int64_t rows, int64_t n, const float* values, int64_t hd,
                   int64_t dims, float (*block)[64]) {
  if (dims != 64) return pv_block_loops(scores, ld, rows, n, values, hd, dims, block);
  switch (rows) {
    case 4: return pv_rows<4>(scores, ld, n, values, hd, block);
    case 3: return pv_rows<3>(scores, ld, n, values, hd, block);
    case 2: return pv_rows<2>(scores, ld, n, values, hd, block);
    default: return pv_rows<1>(scores, ld, n, values, hd, block);
  }
}

void attend_avx2(const AttentionTask& task) { attend(task, scores_block_avx2, scores_few_avx2, pv_block_avx2); }

}  // namespace

const AttentionKernels kAttentionAvx2{KernelLevel::Avx2, attend_avx2};

}  // namespace deltagen::kernels
