// AVX-512 VNNI int8-activation kernels (compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c).
//   group_rows: the decode GEMV (and asymmetric weights). It must stream the
//     packed weights at DRAM speed, so per 64-byte chunk it spends one load,
//     three bit operations and two VPDPBUSD per activation row, and only per
//     block (>= 16 k) the zero-point correction and fp32 scaling.
//   tile: M > 1 (batch rows, speculative verification, prefill), 4 rows x 3
//     groups of 16 columns: at the compute roof it is the instruction mix
//     that counts, not the bytes.
// GCC 12's AVX-512 intrinsic headers trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593); nothing here is uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/kernel_impls.h"

namespace deltagen::kernels::detail {
namespace {

inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Rows m0..m0+R-1 of Y, for the 16 columns of group g.
template <int R, bool kAsym, bool kF16>
void group_rows(const Q8GemmArgs& args, int64_t g, int64_t m0, __mmask16 valid) {
  const PackedWeights& w = *args.w;
  const QuantizedRows& a = *args.a;
  const NBitsShape& s = w.shape();
  const int64_t chunks = s.block_size / PackedWeights::kChunkK;
  const int64_t kb = s.k_blocks();
  const int64_t stride = w.block_stride();
  const int64_t payload = w.payload_bytes();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const int zp_default = w.default_zero_point();

  const int8_t* qa[R];
  const float* as[R];
  const int32_t* sums[R];
  __m512 facc[R];
  for (int r = 0; r < R; ++r) {
    qa[r] = a.row(m0 + r);
    as[r] = a.row_scales(m0 + r);
    sums[r] = a.row_sums(m0 + r);
    facc[r] = _mm512_setzero_ps();
  }

  const uint8_t* record = w.group(g);
  for (int64_t b = 0; b < kb; ++b, record += stride) {
    // Low and high nibbles accumulate separately: two independent VPDPBUSD
    // chains, so the GEMV (R = 1) is not bound by the instruction's latency.
    __m512i acc_lo[R], acc_hi[R];
    for (int r = 0; r < R; ++r) acc_lo[r] = acc_hi[r] = _mm512_setzero_si512();
    const int64_t k0 = b * s.block_size;
    prefetch_record(record, stride, args.prefetch);
#pragma GCC unroll 4
    for (int64_t c = 0; c < chunks; ++c) {
      const uint8_t* chunk = record + c * PackedWeights::kChunkBytes;
      const __m512i v = _mm512_loadu_si512(chunk);
      const __m512i lo = _mm512_and_si512(v, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      for (int r = 0; r < R; ++r) {
        acc_lo[r] = _mm512_dpbusd_epi32(acc_lo[r], lo, broadcast4(qa[r] + k0 + 8 * c));
        acc_hi[r] = _mm512_dpbusd_epi32(acc_hi[r], hi, broadcast4(qa[r] + k0 + 8 * c + 4));
      }
    }
    const uint8_t* scales = record + payload;
    __m512 ws;
    if constexpr (kF16)
      ws = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
    else
      ws = _mm512_loadu_ps(scales);
    __m512i zp = _mm512_set1_epi32(zp_default);
    if constexpr (kAsym)
      zp = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + w.scale_bytes())));
    for (int r = 0; r < R; ++r) {
      // sum_k (q - zp) x = sum_k q x - zp * sum_k x
      const __m512i corr = kAsym ? _mm512_mullo_epi32(zp, _mm512_set1_epi32(sums[r][b]))
                                 : _mm512_set1_epi32(zp_default * sums[r][b]);
      const __m512i dot = _mm512_sub_epi32(_mm512_add_epi32(acc_lo[r], acc_hi[r]), corr);
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(ws, _mm512_set1_ps(as[r][b])), facc[r]);
    }
  }

  const int64_t n0 = g * PackedWeights::kGroupRows;
  const __m512 bias = args.bias ? _mm512_maskz_loadu_ps(valid, args.bias + n0) : _mm512_setzero_ps();
  for (int r = 0; r < R; ++r)
    _mm512_mask_storeu_ps(args.y + (m0 + r) * args.ldy + n0, valid, _mm512_add_ps(facc[r], bias));
}

constexpr int64_t kTilePrefetchBytes = 48 << 10;

// Rows m0..m0+R-1 of Y for the 16*C columns of groups g0..g0+C-1 (symmetric
// weights; multi-row steps and prefill). The GEMV above spends three bit
// operations and a load per 64 weight bytes for each row; here each weight
// chunk is loaded and unpacked once for R rows and each activation broadcast
// feeds C groups, so most issued instructions are VPDPBUSD. The zero-point
// correction starts the block's integer sum instead of being subtracted from
// it: the same integers, so every output is bit-identical to group_rows'.
template <int R, int C, bool kF16>
void tile(const Q8GemmArgs& args, int64_t g0, int64_t m0, bool prefetch_next) {
  const PackedWeights& w = *args.w;
  const QuantizedRows& a = *args.a;
  const NBitsShape& s = w.shape();
  const int64_t chunks = s.block_size / PackedWeights::kChunkK;
  const int64_t kb = s.k_blocks();
  const int64_t stride = w.block_stride();
  // Whole tiles, at least kTilePrefetchBytes: measured on the 0.8B lm_head
  // at M = 4, one tile ahead (28 KB) left a third of the bandwidth unused.
  const int64_t tile_bytes = C * w.group_stride();
  const int64_t ahead = (kTilePrefetchBytes + tile_bytes - 1) / tile_bytes * tile_bytes;
  const int64_t payload = w.payload_bytes();
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const int32_t zp = w.default_zero_point();

  const uint8_t* record[C];
  for (int c = 0; c < C; ++c) record[c] = w.group(g0 + c);
  __m512 facc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) facc[r][c] = _mm512_setzero_ps();

  for (int64_t b = 0; b < kb; ++b) {
    // The first rows over these groups bring a later tile's weights in: the
    // same block of the groups `ahead` bytes on (from DRAM when a multi-row
    // step streams its weights; prefill's are mostly in L2 already).
    if (prefetch_next)
      for (int c = 0; c < C; ++c) prefetch_lines(record[c] + ahead, stride, args.prefetch.to_l2);
    __m512i acc[R][C];
    const int8_t* qa[R];
    for (int r = 0; r < R; ++r) {
      const __m512i start = _mm512_set1_epi32(-zp * a.row_sums(m0 + r)[b]);
      for (int c = 0; c < C; ++c) acc[r][c] = start;
      qa[r] = a.row(m0 + r) + b * s.block_size;
    }
#pragma GCC unroll 4
    for (int64_t k = 0; k < chunks; ++k) {
      for (int c = 0; c < C; ++c) {
        const __m512i v = _mm512_loadu_si512(record[c] + k * PackedWeights::kChunkBytes);
        const __m512i lo = _mm512_and_si512(v, low4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        for (int r = 0; r < R; ++r) {
          acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], lo, broadcast4(qa[r] + 8 * k));
          acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], hi, broadcast4(qa[r] + 8 * k + 4));
        }
      }
    }
    for (int c = 0; c < C; ++c) {
      const uint8_t* scales = record[c] + payload;
      const __m512 ws = kF16 ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)))
                             : _mm512_loadu_ps(scales);
      for (int r = 0; r < R; ++r)
        facc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][c]),
                                     _mm512_mul_ps(ws, _mm512_set1_ps(a.row_scales(m0 + r)[b])), facc[r][c]);
      record[c] += stride;
    }
  }

  for (int c = 0; c < C; ++c) {
    const int64_t n0 = (g0 + c) * PackedWeights::kGroupRows;
    const int64_t valid_cols = std::min<int64_t>(PackedWeights::kGroupRows, s.n - n0);
    const __mmask16 valid = __mmask16((1u << valid_cols) - 1u);
    const __m512 bias = args.bias ? _mm512_maskz_loadu_ps(valid, args.bias + n0) : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r)
      _mm512_mask_storeu_ps(args.y + (m0 + r) * args.ldy + n0, valid, _mm512_add_ps(facc[r][c], bias));
  }
}

// Groups [g0, g0 + C) for every row of [m_begin, m_end), kTileRows at a time.
constexpr int kTileRows = 4;
constexpr int kTileGroups = 3;  // matmul_nbits.cpp rounds tasks to whole tiles

// The last R < kTileRows rows (R = 0: none).
template <int R, int C, bool kF16>
void tile_rest(const Q8GemmArgs& args, int64_t g0, int64_t m0, int64_t rows, bool prefetch_next) {
  if constexpr (R > 0) {
    if (rows == R) return tile<R, C, kF16>(args, g0, m0, prefetch_next);
    tile_rest<R - 1, C, kF16>(args, g0, m0, rows, prefetch_next);
  }
}

template <int C, bool kF16>
void tile_columns(const Q8GemmArgs& args, int64_t g0, int64_t m_begin, int64_t m_end) {
  int64_t m0 = m_begin;
  for (; m0 + kTileRows <= m_end; m0 += kTileRows) tile<kTileRows, C, kF16>(args, g0, m0, m0 == m_begin);
  tile_rest<kTileRows - 1, C, kF16>(args, g0, m0, m_end - m0, m0 == m_begin);
}

template <int C, bool kF16>
void tile_groups_rest(const Q8GemmArgs& args, int64_t g0, int64_t groups, int64_t m_begin, int64_t m_end) {
  if constexpr (C > 0) {
    if (groups == C) return tile_columns<C, kF16>(args, g0, m_begin, m_end);
    tile_groups_rest<C - 1, kF16>(args, g0, groups, m_begin, m_end);
  }
}

template <bool kF16>
void run_tiles(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end) {
  int64_t g = g_begin;
  for (; g + kTileGroups <= g_end; g += kTileGroups) tile_columns<kTileGroups, kF16>(args, g, m_begin, m_end);
  tile_groups_rest<kTileGroups - 1, kF16>(args, g, g_end - g, m_begin, m_end);
}

template <bool kAsym, bool kF16>
void run_groups(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end) {
  const int64_t n = args.w->shape().n;
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t valid_cols = std::min<int64_t>(PackedWeights::kGroupRows, n - g * PackedWeights::kGroupRows);
    const __mmask16 valid = __mmask16((1u << valid_cols) - 1u);
    int64_t m0 = m_begin;
    for (; m0 + 4 <= m_end; m0 += 4) group_rows<4, kAsym, kF16>(args, g, m0, valid);
    switch (m_end - m0) {
      case 3: group_rows<3, kAsym, kF16>(args, g, m0, valid); break;
      case 2: group_rows<2, kAsym, kF16>(args, g, m0, valid); break;
      case 1: group_rows<1, kAsym, kF16>(args, g, m0, valid); break;
      default: break;
    }
  }
}

}  // namespace

void gemm_q8_avx512(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end) {
  const bool f16 = args.w->scale_format() == ScaleFormat::F16;
  if (args.w->asymmetric())
    f16 ? run_groups<true, true>(args, g_begin, g_end, m_begin, m_end)
        : run_groups<true, false>(args, g_begin, g_end, m_begin, m_end);
  else if (args.a->rows <= 4)
    // The decode GEMV and steps of up to 4 rows read every weight once per step: one group's
    // blocks in order stream at the full read bandwidth, where the tile's three groups at a time
    // left a third of it unused on the lm_head (M = 4: 2.8 ms here, 3.9-4.5 ms as tiles).
    f16 ? run_groups<false, true>(args, g_begin, g_end, m_begin, m_end)
        : run_groups<false, false>(args, g_begin, g_end, m_begin, m_end);
  else
    f16 ? run_tiles<true>(args, g_begin, g_end, m_begin, m_end) : run_tiles<false>(args, g_begin, g_end, m_begin, m_end);
}

}  // namespace deltagen::kernels::detail

namespace deltagen::kernels {

const MatMulKernels kMatMulAvx512{KernelLevel::Avx512, detail::gemm_q8_avx512, nullptr, nullptr};

}  // namespace deltagen::kernels
