// AVX-512 VNNI int8-activation kernel (compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c). This is the decode GEMV:
// it must stream the packed weights at DRAM speed, so per 64-byte chunk it
// spends one load, three bit operations and two VPDPBUSD per activation row,
// and only per block (>= 16 k) the zero-point correction and fp32 scaling.
// Up to four activation rows share every weight load (M > 1).
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
    if constexpr (R == 1) prefetch_record(record, stride, args.prefetch);  // R > 1 reuses each load
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

template <bool kAsym, bool kF16>
void run(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end) {
  const int64_t n = args.w->shape().n;
  const int64_t m = args.a->rows;
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t valid_cols = std::min<int64_t>(PackedWeights::kGroupRows, n - g * PackedWeights::kGroupRows);
    const __mmask16 valid = __mmask16((1u << valid_cols) - 1u);
    int64_t m0 = 0;
    for (; m0 + 4 <= m; m0 += 4) group_rows<4, kAsym, kF16>(args, g, m0, valid);
    switch (m - m0) {
      case 3: group_rows<3, kAsym, kF16>(args, g, m0, valid); break;
      case 2: group_rows<2, kAsym, kF16>(args, g, m0, valid); break;
      case 1: group_rows<1, kAsym, kF16>(args, g, m0, valid); break;
      default: break;
    }
  }
}

}  // namespace

void gemm_q8_avx512(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end) {
  const bool f16 = args.w->scale_format() == ScaleFormat::F16;
  if (args.w->asymmetric())
    f16 ? run<true, true>(args, g_begin, g_end) : run<true, false>(args, g_begin, g_end);
  else
    f16 ? run<false, true>(args, g_begin, g_end) : run<false, false>(args, g_begin, g_end);
}

}  // namespace deltagen::kernels::detail

namespace deltagen::kernels {

const MatMulKernels kMatMulAvx512{KernelLevel::Avx512, detail::gemm_q8_avx512, nullptr, nullptr};

}  // namespace deltagen::kernels
