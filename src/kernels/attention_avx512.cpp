// attention_impl.h compiled with the AVX-512 flags (CMakeLists.txt), with
// the two inner blocks written out: the compiler's versions of the same loops
// kept their accumulators in memory and ran slower than the baseline build.
// Called only when cpu_features() says this CPU has AVX-512.
#include <immintrin.h>

#include "kernels/attention_impl.h"

namespace deltagen::kernels {
namespace {

void scores_block_avx512(const float* q, int64_t nq, int64_t hd, const float* kt, float scale, const int64_t* limit,
                         int64_t j0, float* scores, int64_t ld) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t r = 0; r < nq; ++r) {
    if (j0 >= limit[r]) continue;
    const float* qr = q + r * hd;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t d = 0;
    for (; d + 2 <= hd; d += 2) {  // two chains: the FMA latency, not its throughput, bounds one
      a0 = _mm512_fmadd_ps(_mm512_set1_ps(qr[d]), _mm512_loadu_ps(kt + d * kLanes), a0);
      a1 = _mm512_fmadd_ps(_mm512_set1_ps(qr[d + 1]), _mm512_loadu_ps(kt + (d + 1) * kLanes), a1);
    }
    if (d < hd) a0 = _mm512_fmadd_ps(_mm512_set1_ps(qr[d]), _mm512_loadu_ps(kt + d * kLanes), a0);
    _mm512_storeu_ps(scores + r * ld + j0, _mm512_mul_ps(_mm512_add_ps(a0, a1), vscale));
  }
}

void pv_block_avx512(const float* scores, int64_t ld, int64_t rows, int64_t n, const float* values, int64_t hd,
                     int64_t dims, float (*block)[64]) {
  if (rows != 4 || dims != 64) return pv_block_loops(scores, ld, rows, n, values, hd, dims, block);
  __m512 acc[4][4];
  for (auto& row : acc)
    for (auto& a : row) a = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const float* value = values + j * hd;
    const __m512 v0 = _mm512_loadu_ps(value), v1 = _mm512_loadu_ps(value + 16), v2 = _mm512_loadu_ps(value + 32),
                 v3 = _mm512_loadu_ps(value + 48);
    for (int rr = 0; rr < 4; ++rr) {
      const __m512 p = _mm512_set1_ps(scores[rr * ld + j]);
      acc[rr][0] = _mm512_fmadd_ps(p, v0, acc[rr][0]);
      acc[rr][1] = _mm512_fmadd_ps(p, v1, acc[rr][1]);
      acc[rr][2] = _mm512_fmadd_ps(p, v2, acc[rr][2]);
      acc[rr][3] = _mm512_fmadd_ps(p, v3, acc[rr][3]);
    }
  }
  for (int rr = 0; rr < 4; ++rr)
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(block[rr] + 16 * c, acc[rr][c]);
}

}  // namespace

void attend_avx512(const AttentionTask& task) { attend(task, scores_block_avx512, pv_block_avx512); }

}  // namespace deltagen::kernels
