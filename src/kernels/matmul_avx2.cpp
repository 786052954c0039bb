// AVX2 int8-activation kernel (compiled with -mavx2 -mfma -mf16c): the packed
// 64-byte chunk is read as two 8-lane halves (rows 0-7, rows 8-15). Without
// VNNI, VPMADDUBSW multiplies the unsigned nibbles by the signed activations
// into int16 pairs (at most 2*15*127 per pair, so no saturation even after
// adding the low- and high-nibble products), and VPMADDWD widens to int32.
// This file's loop is the GEMV (M = 1) and serves asymmetric weights; M > 1
// with symmetric weights runs the tile of matmul_avx2_tile.h.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/kernel_impls.h"
#include "kernels/matmul_avx2_tile.h"

namespace deltagen::kernels::detail {
namespace {

inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

template <bool kAsym, bool kF16>
void run(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end) {
  const PackedWeights& w = *args.w;
  const QuantizedRows& a = *args.a;
  const NBitsShape& s = w.shape();
  const int64_t chunks = s.block_size / PackedWeights::kChunkK;
  const int64_t kb = s.k_blocks();
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const int zp_default = w.default_zero_point();
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t n0 = g * PackedWeights::kGroupRows;
    const int64_t valid = std::min<int64_t>(PackedWeights::kGroupRows, s.n - n0);
    for (int64_t m = m_begin; m < m_end; ++m) {
      __m256 facc0 = _mm256_setzero_ps(), facc1 = _mm256_setzero_ps();
      const uint8_t* record = w.group(g);
      const int8_t* qa = a.row(m);
      for (int64_t b = 0; b < kb; ++b, record += w.block_stride(), qa += s.block_size) {
        if (a.rows == 1) prefetch_record(record, w.block_stride(), args.prefetch);
        __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
        for (int64_t c = 0; c < chunks; ++c) {
          const uint8_t* chunk = record + c * PackedWeights::kChunkBytes;
          const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk));
          const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(chunk + 32));
          const __m256i x_lo = broadcast4(qa + 8 * c), x_hi = broadcast4(qa + 8 * c + 4);
          const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v0, low4), x_lo),
                                              _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v0, 4), low4), x_hi));
          const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(v1, low4), x_lo),
                                              _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v1, 4), low4), x_hi));
          acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(p0, ones16));
          acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(p1, ones16));
        }
        const uint8_t* scales = record + w.payload_bytes();
        __m256 ws0, ws1;
        if constexpr (kF16) {
          ws0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
          ws1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16)));
        } else {
          ws0 = _mm256_loadu_ps(reinterpret_cast<const float*>(scales));
          ws1 = _mm256_loadu_ps(reinterpret_cast<const float*>(scales) + 8);
        }
        const __m256i sum = _mm256_set1_epi32(a.row_sums(m)[b]);
        if constexpr (kAsym) {
          const uint8_t* zps = scales + w.scale_bytes();
          const __m256i z0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zps)));
          const __m256i z1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zps + 8)));
          acc0 = _mm256_sub_epi32(acc0, _mm256_mullo_epi32(z0, sum));
          acc1 = _mm256_sub_epi32(acc1, _mm256_mullo_epi32(z1, sum));
        } else {
          const __m256i corr = _mm256_set1_epi32(zp_default * a.row_sums(m)[b]);
          acc0 = _mm256_sub_epi32(acc0, corr);
          acc1 = _mm256_sub_epi32(acc1, corr);
        }
        const __m256 as = _mm256_set1_ps(a.row_scales(m)[b]);
        facc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc0), _mm256_mul_ps(ws0, as), facc0);
        facc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc1), _mm256_mul_ps(ws1, as), facc1);
      }
      alignas(32) float out[16];
      _mm256_store_ps(out, facc0);
      _mm256_store_ps(out + 8, facc1);
      float* y = args.y + m * args.ldy + n0;
      for (int64_t r = 0; r < valid; ++r) y[r] = out[r] + (args.bias ? args.bias[n0 + r] : 0.0f);
    }
  }
}

}  // namespace

void gemm_q8_avx2(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end) {
  const bool f16 = args.w->scale_format() == ScaleFormat::F16;
  if (args.w->asymmetric())
    f16 ? run<true, true>(args, g_begin, g_end, m_begin, m_end) : run<true, false>(args, g_begin, g_end, m_begin, m_end);
  else if (args.a->rows == 1)  // the decode GEMV
    f16 ? run<false, true>(args, g_begin, g_end, m_begin, m_end) : run<false, false>(args, g_begin, g_end, m_begin, m_end);
  else if (args.avx_vnni)
    gemm_q8_avx2_vnni_tiles(args, g_begin, g_end, m_begin, m_end);
  else
    avx2_tiles<false>(args, g_begin, g_end, m_begin, m_end);
}

}  // namespace deltagen::kernels::detail

namespace deltagen::kernels {

const MatMulKernels kMatMulAvx2{KernelLevel::Avx2, detail::gemm_q8_avx2, nullptr, nullptr};

}  // namespace deltagen::kernels
