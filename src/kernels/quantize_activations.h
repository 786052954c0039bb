// Activation (A) preparation for the int8 dot-product kernels: each row is
// quantized per block of block_size along K (the weights' blocks), symmetric,
// to int8 in [-127, 127], as MatMulNBits' accuracy_level 4 allows:
//   a[k] ≈ value[k] * scale[b],  scale[b] = max|a| over the block / 127.
// The per-block sums of the int8 values let the kernels multiply the raw
// (unsigned) weight nibbles and subtract zero_point * sum afterwards.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace deltagen::kernels {

struct QuantizedRows {
  int64_t rows = 0;
  int64_t k_padded = 0;  // k_blocks * block_size; values beyond K are 0
  int64_t k_blocks = 0;
  std::vector<int8_t> values;  // rows x k_padded
  std::vector<float> scales;   // rows x k_blocks
  std::vector<int32_t> sums;   // rows x k_blocks

  const int8_t* row(int64_t m) const { return values.data() + m * k_padded; }
  const float* row_scales(int64_t m) const { return scales.data() + m * k_blocks; }
  const int32_t* row_sums(int64_t m) const { return sums.data() + m * k_blocks; }
};

// Quantizes rows x k floats (row stride lda) into `out` (reusing its storage).
// Every level gives the same bits (round to nearest even; a NaN becomes 0).
// It runs before every decode GEMV on one thread: the portable loop's libm
// rounding call cost ~7 us per 1024 values, ~0.7 ms of a 0.8B decode step.
void quantize_rows(const float* a, int64_t rows, int64_t k, int64_t lda, int block_size, QuantizedRows& out,
                   KernelLevel level = default_level());
// The same, rows spread over `parallel` (prefill: ~1 us a row on one thread).
void quantize_rows(const float* a, int64_t rows, int64_t k, int64_t lda, int block_size, QuantizedRows& out,
                   const Parallel& parallel, KernelLevel level = default_level());

// The per-ISA part (dispatch.h): one row of k values into int8 blocks.
struct QuantizeKernels {
  KernelLevel isa;
  void (*row)(const float* src, int64_t k, int block_size, int8_t* dst, float* scales, int32_t* sums);
};
extern const QuantizeKernels kQuantizeScalar;  // quantize_activations.cpp
extern const QuantizeKernels kQuantizeAvx2;    // quantize_activations_avx2.cpp
extern const QuantizeKernels kQuantizeAvx512;  // quantize_activations_avx512.cpp
extern const KernelFamily<QuantizeKernels> kQuantizeFamily;  // AMX: the AVX-512 table

namespace detail {
// One block of n values: int8 values, their sum, the scale (max|a| / 127).
void quantize_block_portable(const float* src, int64_t n, int8_t* dst, float* scale, int32_t* sum);
}  // namespace detail

namespace {
// The row loop every level shares: `block` takes blocks whose length is a
// multiple of `lanes`, the portable block the rest (a ragged last block).
// Internal linkage: each per-ISA file compiles its own copy (an inline
// function shared across files would be one copy, built with whichever
// file's flags the linker kept).
template <typename Block>
inline void quantize_row_with(Block block, int64_t lanes, const float* src, int64_t k, int block_size, int8_t* dst,
                              float* scales, int32_t* sums) {
  const int64_t blocks = (k + block_size - 1) / block_size;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t k0 = b * block_size, n = std::min<int64_t>(k, k0 + block_size) - k0;
    if (n % lanes == 0)
      block(src + k0, n, dst + k0, scales + b, sums + b);
    else
      detail::quantize_block_portable(src + k0, n, dst + k0, scales + b, sums + b);
  }
}
}  // namespace

}  // namespace deltagen::kernels
