// AMX-BF16 GEMM for prefill (compiled with the AVX-512 flags plus
// -mavx512bf16 -mamx-tile -mamx-bf16).
//
// Why bf16 and not int8 tiles: the weights carry a scale per block of 16..256
// k, so an int8 tile product (64 k deep) would have to be stored and rescaled
// after every block, which costs more than the tile multiply itself. In bf16
// the scales are folded into the weights once per call ((q - zp) * scale,
// rounded to bf16, relative error <= 2^-9, less than the int8 activations of
// accuracy_level 4) and the tiles accumulate in fp32 across all of K.
//
// Work split: a task owns a range of 16-column groups. It dequantizes them
// into a panel of B tiles (kept in L2, reused for every row block of A), then
// walks A 32 rows at a time against pairs of groups: 2x2 C tiles (tmm0-3),
// A tiles tmm4-5, B tiles tmm6-7, so each pair of tile loads feeds two
// multiplies.
// GCC 12's AVX-512 intrinsic headers trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593); nothing here is uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/kernel_impls.h"

namespace deltagen::kernels::detail {
namespace {

constexpr int64_t kTileRows = 16;
constexpr int64_t kTileElems = kTileRows * kAmxTileK;  // bf16 values in one B tile (1 KiB)

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// All eight tiles 16 rows x 64 bytes. The config is handed to LDTILECFG
// through an "m" operand so the compiler cannot drop the stores that fill it
// (GCC 12's _tile_loadconfig does not tell it the memory is read).
void configure_tiles() {
  TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.colsb[i] = 64;
    cfg.rows[i] = kTileRows;
  }
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

// 16 fp32 weights for k (even lanes) and 16 for k+1 -> one B tile row: lane r
// holds the bf16 pair (w[r][k], w[r][k+1]).
inline __m512i pair_row(__m512 even, __m512 odd) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i packed = (__m512i)_mm512_cvtne2ps_pbh(odd, even);  // words 0-15 even, 16-31 odd
  return _mm512_permutexvar_epi16(idx, packed);
}

// The dequantized weight of byte i of every lane of x (4 consecutive k of one row per lane).
inline __m512 lane_byte(__m512i x, int i, __m512i zp, __m512 ws) {
  const __m512i q = _mm512_and_si512(_mm512_srli_epi32(x, 8 * i), _mm512_set1_epi32(0xff));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, zp)), ws);
}

// Writes k_tiles B tiles (bf16 pairs, tile row = k pair) for group g.
template <bool kAsym, bool kF16>
void dequantize_group(const PackedWeights& w, int64_t g, int64_t k_tiles, uint16_t* out) {
  const NBitsShape& s = w.shape();
  const int64_t chunks = s.block_size / PackedWeights::kChunkK;
  const int64_t k_limit = k_tiles * kAmxTileK;  // A is zero from K on; nothing past this is read
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const uint8_t* record = w.group(g);
  int64_t k = 0;
  for (int64_t b = 0; b < s.k_blocks() && k < k_limit; ++b, record += w.block_stride()) {
    const uint8_t* scales = record + w.payload_bytes();
    const __m512 ws = kF16 ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)))
                           : _mm512_loadu_ps(scales);
    const __m512i zp = kAsym ? _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + w.scale_bytes())))
                             : _mm512_set1_epi32(w.default_zero_point());
    for (int64_t c = 0; c < chunks && k < k_limit; ++c, k += PackedWeights::kChunkK) {
      const __m512i v = _mm512_loadu_si512(record + c * PackedWeights::kChunkBytes);
      const __m512i lo = _mm512_and_si512(v, low4);                          // k .. k+3
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);    // k+4 .. k+7
      // 8 consecutive k = 4 pair rows of the same tile (8 divides the tile's 32).
      uint16_t* row = out + (k / kAmxTileK) * kTileElems + (k % kAmxTileK) / 2 * kAmxTileK;
      _mm512_storeu_si512(row + 0 * kAmxTileK, pair_row(lane_byte(lo, 0, zp, ws), lane_byte(lo, 1, zp, ws)));
      _mm512_storeu_si512(row + 1 * kAmxTileK, pair_row(lane_byte(lo, 2, zp, ws), lane_byte(lo, 3, zp, ws)));
      _mm512_storeu_si512(row + 2 * kAmxTileK, pair_row(lane_byte(hi, 0, zp, ws), lane_byte(hi, 1, zp, ws)));
      _mm512_storeu_si512(row + 3 * kAmxTileK, pair_row(lane_byte(hi, 2, zp, ws), lane_byte(hi, 3, zp, ws)));
    }
  }
  // Rows past the last block (only when K_padded of the weights < k_tiles * 32).
  if (k < k_limit) std::memset(out + k / 2 * kAmxTileK, 0, size_t(k_limit - k) / 2 * kAmxTileK * sizeof(uint16_t));
}

void dequantize_group_any(const PackedWeights& w, int64_t g, int64_t k_tiles, uint16_t* out) {
  const bool f16 = w.scale_format() == ScaleFormat::F16;
  if (w.asymmetric())
    f16 ? dequantize_group<true, true>(w, g, k_tiles, out) : dequantize_group<true, false>(w, g, k_tiles, out);
  else
    f16 ? dequantize_group<false, true>(w, g, k_tiles, out) : dequantize_group<false, false>(w, g, k_tiles, out);
}

// C tiles (32 x 16*cols floats at `c`, row stride 32) -> Y rows m0.., columns n0.., plus bias.
void write_block(const AmxGemmArgs& args, const float* c, int64_t m0, int64_t n0, int64_t cols) {
  const int64_t n = args.w->shape().n;
  const int64_t valid_cols = std::min(cols, n - n0);
  const int64_t valid_rows = std::min<int64_t>(kAmxRowBlock, args.m - m0);
  const __mmask16 lo_mask = __mmask16(valid_cols >= 16 ? 0xffff : (1u << valid_cols) - 1u);
  const __mmask16 hi_mask = __mmask16(valid_cols >= 32 ? 0xffff : valid_cols > 16 ? (1u << (valid_cols - 16)) - 1u : 0u);
  const __m512 bias_lo = args.bias ? _mm512_maskz_loadu_ps(lo_mask, args.bias + n0) : _mm512_setzero_ps();
  const __m512 bias_hi = args.bias && hi_mask ? _mm512_maskz_loadu_ps(hi_mask, args.bias + n0 + 16) : _mm512_setzero_ps();
  for (int64_t r = 0; r < valid_rows; ++r) {
    float* y = args.y + (m0 + r) * args.ldy + n0;
    _mm512_mask_storeu_ps(y, lo_mask, _mm512_add_ps(_mm512_load_ps(c + r * 32), bias_lo));
    if (hi_mask) _mm512_mask_storeu_ps(y + 16, hi_mask, _mm512_add_ps(_mm512_load_ps(c + r * 32 + 16), bias_hi));
  }
}

// One 32-row block of A against one group (kTwo = false) or two adjacent
// groups; the C tiles go to `c` with row stride ldc floats.
template <bool kTwo>
void tile_block(const AmxGemmArgs& args, const uint16_t* b0, const uint16_t* b1, int64_t m0, float* c, int64_t ldc) {
  const int64_t lda = args.k_tiles * kAmxTileK;
  const uint16_t* a0 = args.a + m0 * lda;
  const uint16_t* a1 = a0 + kTileRows * lda;
  const int64_t a_stride = lda * int64_t(sizeof(uint16_t));
  _tile_zero(0);
  _tile_zero(2);
  if constexpr (kTwo) {
    _tile_zero(1);
    _tile_zero(3);
  }
  for (int64_t t = 0; t < args.k_tiles; ++t) {
    _tile_loadd(4, a0 + t * kAmxTileK, a_stride);
    _tile_loadd(5, a1 + t * kAmxTileK, a_stride);
    _tile_loadd(6, b0 + t * kTileElems, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(2, 5, 6);
    if constexpr (kTwo) {
      _tile_loadd(7, b1 + t * kTileElems, 64);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  const int64_t stride = ldc * int64_t(sizeof(float));
  _tile_stored(0, c, stride);
  _tile_stored(2, c + kTileRows * ldc, stride);
  if constexpr (kTwo) {
    _tile_stored(1, c + 16, stride);
    _tile_stored(3, c + kTileRows * ldc + 16, stride);
  }
}

struct FreeAligned {
  void operator()(void* p) const { std::free(p); }
};

// Per-thread scratch, grown on demand and kept: tasks run on the same pool
// threads call after call.
uint16_t* panel_buffer(int64_t bytes) {
  thread_local std::unique_ptr<void, FreeAligned> buffer;
  thread_local int64_t capacity = 0;
  if (bytes > capacity) {
    capacity = (bytes + 4095) / 4096 * 4096;
    buffer.reset(std::aligned_alloc(64, size_t(capacity)));
  }
  return static_cast<uint16_t*>(buffer.get());
}

}  // namespace

void convert_rows_bf16_avx512(const float* a, int64_t rows, int64_t k, int64_t lda, uint16_t* out,
                              int64_t k_padded) {
  for (int64_t m = 0; m < rows; ++m) {
    const float* src = a + m * lda;
    uint16_t* dst = out + m * k_padded;
    int64_t i = 0;
    for (; i + 16 <= k; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
    if (i < k) {
      const __mmask16 mask = __mmask16((1u << (k - i)) - 1u);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, src + i)));
      i += 16;
    }
    if (i < k_padded) std::memset(dst + i, 0, size_t(k_padded - i) * sizeof(uint16_t));
  }
}

int64_t amx_panel_bytes(const PackedWeights& /*w*/, int64_t k_tiles, int64_t groups) {
  return groups * k_tiles * kTileElems * int64_t(sizeof(uint16_t));
}

void gemm_bf16_amx(const AmxGemmArgs& args, int64_t g_begin, int64_t g_end) {
  const PackedWeights& w = *args.w;
  const int64_t tiles_per_group = args.k_tiles * kTileElems;
  uint16_t* panel = panel_buffer(amx_panel_bytes(w, args.k_tiles, g_end - g_begin));
  for (int64_t g = g_begin; g < g_end; ++g) dequantize_group_any(w, g, args.k_tiles, panel + (g - g_begin) * tiles_per_group);

  configure_tiles();
  alignas(64) float c[kAmxRowBlock * 32];
  for (int64_t m0 = 0; m0 < args.m_padded; m0 += kAmxRowBlock) {
    for (int64_t g = g_begin; g < g_end; g += 2) {
      const uint16_t* b0 = panel + (g - g_begin) * tiles_per_group;
      const int64_t n0 = g * PackedWeights::kGroupRows;
      if (g + 1 < g_end) {
        // A whole 32x32 block inside Y with nothing to add: tiles straight to Y.
        if (!args.bias && m0 + kAmxRowBlock <= args.m && n0 + 32 <= w.shape().n) {
          tile_block<true>(args, b0, b0 + tiles_per_group, m0, args.y + m0 * args.ldy + n0, args.ldy);
        } else {
          tile_block<true>(args, b0, b0 + tiles_per_group, m0, c, 32);
          write_block(args, c, m0, n0, 32);
        }
      } else {
        tile_block<false>(args, b0, nullptr, m0, c, 32);
        write_block(args, c, m0, n0, 16);
      }
    }
  }
  _tile_release();  // back to the init state: cheaper context switches
}

}  // namespace deltagen::kernels::detail

namespace deltagen::kernels {

const MatMulKernels kMatMulAmx{KernelLevel::Amx, detail::gemm_q8_avx512, detail::convert_rows_bf16_avx512, detail::gemm_bf16_amx};

}  // namespace deltagen::kernels
