// Block-wise round-to-nearest weight quantization in the layout of
// com.microsoft MatMulNBits and GatherBlockQuantized (ONNX Runtime).
//
// A weight W [N, K] (N output features = rows of a Hugging Face Linear
// weight, K inputs) is cut along K into blocks of `block_size` values; each
// block gets one scale (and, when asymmetric, one zero point):
//   w ~= (q - zero_point) * scale,   q in [0, 2^bits - 1]
// The last block of a row is zero-padded when K is not a multiple of the
// block size.
//
// Symmetric (the default, as ONNX Runtime's default quantizer): the signed
// value of largest magnitude m gives scale = m / -2^(bits-1), and
// q = clip(round(w / scale), -2^(bits-1), 2^(bits-1) - 1) + 2^(bits-1); the
// zero point is the implicit 2^(bits-1), so no zero-point tensor is stored.
// Asymmetric: scale = (max - min) / (2^bits - 1) over the block with 0 inside
// [min, max], zero_point = round(-min / scale).
//
// Storage (what the ops read):
//   packed       uint8 [N, blocks, block_size * bits / 8]; 4-bit values two
//                per byte, the lower-index value in the low nibble
//   scales       [N, blocks] in the activation dtype
//   zero_points  uint8 [N, ceil(blocks * bits / 8)]; 4-bit ones two per byte
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace deltagen::quant {

struct BlockFormat {
  int bits = 4;              // 4 or 8
  int64_t block_size = 32;   // a power of two in [16, 256]
  bool symmetric = true;

  int64_t blocks_per_row(int64_t k) const { return (k + block_size - 1) / block_size; }
  int64_t bytes_per_block() const { return block_size * bits / 8; }
  int64_t packed_row_bytes(int64_t k) const { return blocks_per_row(k) * bytes_per_block(); }
  int64_t zero_point_row_bytes(int64_t k) const { return (blocks_per_row(k) * bits + 7) / 8; }
  int implicit_zero_point() const { return 1 << (bits - 1); }
  int max_code() const { return (1 << bits) - 1; }
};

// Throws Error("--block-size" / "quantization") for an unsupported format.
void check_block_format(const BlockFormat& format);

// One row of K values. `codes` receives blocks * block_size unpacked codes
// (padding included), `scales` and `zero_points` one entry per block.
void quantize_row(const float* row, int64_t k, const BlockFormat& format, uint8_t* codes, float* scales,
                  uint8_t* zero_points);

// Packs unpacked codes (one per byte) into the storage layout; `count` codes.
void pack_codes(const uint8_t* codes, int64_t count, int bits, uint8_t* packed);
uint8_t unpack_code(const uint8_t* packed, int64_t index, int bits);

// A quantized [rows, cols] matrix in the storage layout above.
struct QuantizedMatrix {
  int64_t rows = 0, cols = 0;
  BlockFormat format;
  std::vector<uint8_t> packed;       // rows * packed_row_bytes(cols)
  std::vector<float> scales;         // rows * blocks_per_row(cols)
  std::vector<uint8_t> zero_points;  // rows * zero_point_row_bytes(cols); empty when symmetric
};

// Writes the K fp32 values of row r into dst.
using RowSource = std::function<void(int64_t row, float* dst)>;
// Told that rows [begin, end) have been read and will not be read again (so
// their source memory can be released); called from the worker threads.
using RowsDone = std::function<void(int64_t begin, int64_t end)>;

// Quantizes `rows` rows read from `source`, split over `threads` threads
// (0 = all cores). The result does not depend on the thread count.
QuantizedMatrix quantize_matrix(int64_t rows, int64_t cols, const BlockFormat& format, const RowSource& source,
                                int threads, const RowsDone& rows_done = nullptr);

// Fits `count` consecutive rows of K values, rows [count][K], like
// quantize_row does one (codes [count][blocks * block_size], scales and zero
// points [count][blocks]); may change `rows`. Rows are independent: how they
// are grouped into calls must not change the result.
using RowQuantizer =
    std::function<void(float* rows, int64_t count, uint8_t* codes, float* scales, uint8_t* zero_points)>;
constexpr int64_t kRowsPerFit = 64;  // at most this many rows per call (gptq reads U once per call)
// quantize_matrix with another way to fit the rows (quant_methods.h); it is
// called from several threads at once.
QuantizedMatrix quantize_matrix(int64_t rows, int64_t cols, const BlockFormat& format, const RowSource& source,
                                int threads, const RowsDone& rows_done, const RowQuantizer& fit_row);

// The scalar reference: (q - zero_point) * scale for every element, [rows, cols].
std::vector<float> dequantize_matrix(const QuantizedMatrix& m);

}  // namespace deltagen::quant
