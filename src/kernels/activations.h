// Activation (A) preparation for the int8 dot-product kernels: each row is
// quantized per block of block_size along K (the weights' blocks), symmetric,
// to int8 in [-127, 127], as MatMulNBits' accuracy_level 4 allows:
//   a[k] ≈ value[k] * scale[b],  scale[b] = max|a| over the block / 127.
// The per-block sums of the int8 values let the kernels multiply the raw
// (unsigned) weight nibbles and subtract zero_point * sum afterwards.
#pragma once
#include <cstdint>
#include <vector>

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
void quantize_rows(const float* a, int64_t rows, int64_t k, int64_t lda, int block_size, QuantizedRows& out);

}  // namespace deltagen::kernels
