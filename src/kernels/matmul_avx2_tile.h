// The AVX2 multi-row tile (M > 1: batch rows, speculative verification,
// prefill), included by matmul_avx2.cpp (VPMADDUBSW) and
// matmul_avx2_vnni.cpp (AVX-VNNI's VEX VPDPBUSD, compiled with -mavxvnni);
// internal linkage, so the two copies never meet at link time.
//
// R rows x one group of 16 columns (two 8-column halves): each weight chunk
// is loaded and unpacked once for R rows. Without VNNI the int16 pair sums of
// up to four chunks are added before widening: a pair is at most 2*15*127,
// lo + hi 7620, four chunks 30480 < 32767, so nothing saturates and the int32
// sums are the GEMV's exactly. The zero-point correction starts the block's
// sum, as in the AVX-512 tile: every output is bit-identical to the
// row-at-a-time loop's (the same integers, the same float operations).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/kernel_impls.h"

namespace deltagen::kernels::detail {
namespace {

inline __m256i broadcast4_avx2(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

constexpr int kAvx2TileRows = 4;
constexpr int64_t kChunksPerWiden = 4;  // int16 pair sums stay exact for 4 chunks

template <int R, bool kF16, bool kVnni>
void avx2_tile(const Q8GemmArgs& args, int64_t g, int64_t m0) {
  const PackedWeights& w = *args.w;
  const QuantizedRows& a = *args.a;
  const NBitsShape& s = w.shape();
  const int64_t chunks = s.block_size / PackedWeights::kChunkK;
  const int64_t stride = w.block_stride();
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const int32_t zp = w.default_zero_point();

  __m256 facc[R][2];
  for (int r = 0; r < R; ++r) facc[r][0] = facc[r][1] = _mm256_setzero_ps();
  const uint8_t* record = w.group(g);
  for (int64_t b = 0; b < s.k_blocks(); ++b, record += stride) {
    __m256i acc[R][2];
    const int8_t* qa[R];
    for (int r = 0; r < R; ++r) {
      acc[r][0] = acc[r][1] = _mm256_set1_epi32(-zp * a.row_sums(m0 + r)[b]);
      qa[r] = a.row(m0 + r) + b * s.block_size;
    }
    for (int64_t k0 = 0; k0 < chunks; k0 += kChunksPerWiden) {
      const int64_t k1 = std::min(chunks, k0 + kChunksPerWiden);
      __m256i pairs[R][2];
      if constexpr (!kVnni)
        for (int r = 0; r < R; ++r) pairs[r][0] = pairs[r][1] = _mm256_setzero_si256();
      for (int64_t k = k0; k < k1; ++k)
        for (int h = 0; h < 2; ++h) {
          const __m256i v =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record + k * PackedWeights::kChunkBytes + 32 * h));
          const __m256i lo = _mm256_and_si256(v, low4);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          for (int r = 0; r < R; ++r) {
            const __m256i x_lo = broadcast4_avx2(qa[r] + 8 * k), x_hi = broadcast4_avx2(qa[r] + 8 * k + 4);
            if constexpr (kVnni) {
              acc[r][h] = _mm256_dpbusd_avx_epi32(acc[r][h], lo, x_lo);
              acc[r][h] = _mm256_dpbusd_avx_epi32(acc[r][h], hi, x_hi);
            } else {
              const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x_lo), _mm256_maddubs_epi16(hi, x_hi));
              pairs[r][h] = _mm256_add_epi16(pairs[r][h], p);
            }
          }
        }
      if constexpr (!kVnni)
        for (int r = 0; r < R; ++r)
          for (int h = 0; h < 2; ++h) acc[r][h] = _mm256_add_epi32(acc[r][h], _mm256_madd_epi16(pairs[r][h], ones16));
    }
    const uint8_t* scales = record + w.payload_bytes();
    __m256 ws[2];
    for (int h = 0; h < 2; ++h)
      ws[h] = kF16 ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * h)))
                   : _mm256_loadu_ps(reinterpret_cast<const float*>(scales) + 8 * h);
    for (int r = 0; r < R; ++r) {
      const __m256 as = _mm256_set1_ps(a.row_scales(m0 + r)[b]);
      for (int h = 0; h < 2; ++h)
        facc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][h]), _mm256_mul_ps(ws[h], as), facc[r][h]);
    }
  }

  const int64_t n0 = g * PackedWeights::kGroupRows;
  const int64_t valid = std::min<int64_t>(PackedWeights::kGroupRows, s.n - n0);
  for (int r = 0; r < R; ++r) {
    alignas(32) float out[16];
    _mm256_store_ps(out, facc[r][0]);
    _mm256_store_ps(out + 8, facc[r][1]);
    float* y = args.y + (m0 + r) * args.ldy + n0;
    for (int64_t i = 0; i < valid; ++i) y[i] = out[i] + (args.bias ? args.bias[n0 + i] : 0.0f);
  }
}

template <int R, bool kF16, bool kVnni>
void avx2_tile_rest(const Q8GemmArgs& args, int64_t g, int64_t m0, int64_t rows) {
  if constexpr (R > 0) {
    if (rows == R) return avx2_tile<R, kF16, kVnni>(args, g, m0);
    avx2_tile_rest<R - 1, kF16, kVnni>(args, g, m0, rows);
  }
}

// Symmetric weights, M > 1: groups [g_begin, g_end) of rows [m_begin, m_end).
template <bool kVnni>
void avx2_tiles(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end) {
  const bool f16 = args.w->scale_format() == ScaleFormat::F16;
  for (int64_t g = g_begin; g < g_end; ++g) {
    int64_t m0 = m_begin;
    for (; m0 + kAvx2TileRows <= m_end; m0 += kAvx2TileRows)
      f16 ? avx2_tile<kAvx2TileRows, true, kVnni>(args, g, m0) : avx2_tile<kAvx2TileRows, false, kVnni>(args, g, m0);
    f16 ? avx2_tile_rest<kAvx2TileRows - 1, true, kVnni>(args, g, m0, m_end - m0)
        : avx2_tile_rest<kAvx2TileRows - 1, false, kVnni>(args, g, m0, m_end - m0);
  }
}

}  // namespace
}  // namespace deltagen::kernels::detail
