// The per-ISA kernel entry points behind matmul_nbits.h. Each is defined in
// its own file compiled with that ISA's flags (see CMakeLists.txt), which also
// defines that level's MatMulKernels table (dispatch.h); matmul_nbits.cpp
// reaches them only through kMatMulFamily.
#pragma once
#include <xmmintrin.h>

#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/quantize_activations.h"
#include "kernels/matmul_nbits.h"
#include "kernels/packed_weights.h"

namespace deltagen::kernels::detail {

// Output columns [16*g_begin, 16*g_end) ∩ [0, N) of rows [m_begin, m_end) of
// Y, from int8-quantized rows of A (accuracy_level 4 semantics).
struct Q8GemmArgs {
  const PackedWeights* w = nullptr;
  const QuantizedRows* a = nullptr;
  const float* bias = nullptr;  // N floats or null
  float* y = nullptr;           // a->rows x ldy
  int64_t ldy = 0;
  MatMulPrefetch prefetch;
  bool avx_vnni = false;  // the AVX2 table may use AVX-VNNI (the CPU has it, the config allows it)
};
// A GEMV streams its weights once: the int8 kernels prefetch every line of a
// block record `prefetch.distance` bytes ahead of it (MatMulPrefetch).
// (A prefetch never faults: a line past the end of the weights is harmless.)
inline void prefetch_lines(const uint8_t* at, int64_t bytes, bool to_l2) {
  const char* p = reinterpret_cast<const char*>(at);
  if (to_l2)
    for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T2);
  else
    for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
}
inline void prefetch_record(const uint8_t* record, int64_t record_bytes, const MatMulPrefetch& prefetch) {
  prefetch_lines(record + prefetch.distance, record_bytes, prefetch.to_l2);
}

void gemm_q8_scalar(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end);
void gemm_q8_avx2(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end);
// The AVX2 table's multi-row tile with AVX-VNNI (matmul_avx2_vnni.cpp).
void gemm_q8_avx2_vnni_tiles(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end);
void gemm_q8_avx512(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end);

// AMX path: A converted to bf16 once per call, weights dequantized to bf16
// tiles per task, fp32 accumulation in tiles.
constexpr int64_t kAmxRowBlock = 32;  // rows of A per C tile pair
constexpr int64_t kAmxTileK = 32;     // bf16 values per tile row

// rows x k floats (stride lda) -> bf16 rows of k_padded values (zero beyond k).
void convert_rows_bf16_avx512(const float* a, int64_t rows, int64_t k, int64_t lda, uint16_t* out,
                              int64_t k_padded);

struct AmxGemmArgs {
  const PackedWeights* w = nullptr;
  const uint16_t* a = nullptr;  // m_padded x (k_tiles * kAmxTileK) bf16, zero padded
  int64_t m = 0;                // valid rows
  int64_t m_padded = 0;         // multiple of kAmxRowBlock
  int64_t k_tiles = 0;          // ceil(K / kAmxTileK)
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
};
// Scratch for the dequantized weight tiles of one task.
int64_t amx_panel_bytes(const PackedWeights& w, int64_t k_tiles, int64_t groups);
void gemm_bf16_amx(const AmxGemmArgs& args, int64_t g_begin, int64_t g_end);

}  // namespace deltagen::kernels::detail

namespace deltagen::kernels {

struct MatMulKernels {
  KernelLevel isa;
  // The int8-activation GEMM (decode, and prefill without AMX).
  void (*gemm_q8)(const detail::Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end);
  // The bf16 tile path for M >= amx_min_rows: AMX only, null in the lower tables.
  void (*convert_rows_bf16)(const float* a, int64_t rows, int64_t k, int64_t lda, uint16_t* out, int64_t k_padded);
  void (*gemm_bf16)(const detail::AmxGemmArgs& args, int64_t g_begin, int64_t g_end);
};
extern const MatMulKernels kMatMulScalar;  // matmul_scalar.cpp
extern const MatMulKernels kMatMulAvx2;    // matmul_avx2.cpp
extern const MatMulKernels kMatMulAvx512;  // matmul_avx512.cpp
extern const MatMulKernels kMatMulAmx;     // matmul_amx.cpp: the AVX-512 GEMM for small M, tiles for large
extern const KernelFamily<MatMulKernels> kMatMulFamily;  // matmul_nbits.cpp

}  // namespace deltagen::kernels
