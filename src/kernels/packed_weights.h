// MatMulNBits weights: the ONNX file layout (NBitsWeightsView) and the layout
// deltagen's kernels stream (PackedWeights), repacked once at load time.
//
// File layout (com.microsoft MatMulNBits, bits = 4): B is (N, k_blocks,
// block_size/2) uint8, packed along K, low nibble first; scales (N, k_blocks)
// fp32; optional zero points (N, ceil(k_blocks/2)) uint8, packed the same way;
// without them every zero point is 8. w[n][k] = (q[n][k] - zp[n][b]) * scale[n][b]
// with b = k / block_size.
//
// Packed layout. Output rows are taken 16 at a time ("groups"; the last group
// is padded with zero rows). A group is one contiguous run of k_blocks block
// records, so one thread computing 16 outputs reads one forward stream:
//
//   block record = payload | 16 scales | 16 zero points (asymmetric only)
//   payload      = block_size/8 chunks of 64 bytes; chunk c holds k = 8c..8c+7
//                  of the block for the 16 rows: byte 4r+i has q[r][8c+i] in its
//                  low nibble and q[r][8c+4+i] in its high nibble (i = 0..3).
//
// Why: one 64-byte load, masked (low nibbles) or shifted (high nibbles), gives
// a register whose 32-bit lane r holds 4 consecutive k of row r. That is the
// operand VPDPBUSD multiplies with 4 broadcast activation bytes, so 16 outputs
// accumulate in one register with no horizontal sums; AVX2 reads the same chunk
// as two 8-lane halves; and the AMX path turns a lane into bf16 k-pairs (the
// tile "VNNI" layout) with shifts only. The scales follow their payload so the
// stream never jumps, and are stored as fp16 when that is lossless enough (see
// PackOptions): at block size 32 that is 10% fewer bytes per GEMV.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "kernels/stream_memory.h"

namespace deltagen::kernels {

struct NBitsShape {
  int64_t n = 0;  // output features (rows of B)
  int64_t k = 0;  // input features
  int bits = 4;
  int block_size = 32;

  int64_t k_blocks() const { return (k + block_size - 1) / block_size; }
  int64_t file_block_bytes() const { return int64_t(block_size) * bits / 8; }
  int64_t zero_point_row_bytes() const { return (k_blocks() * bits + 7) / 8; }
  // Bytes of B + fp32 scales (+ zero points) as stored in the ONNX file.
  int64_t file_bytes(bool with_zero_points) const {
    return n * (k_blocks() * (file_block_bytes() + 4) + (with_zero_points ? zero_point_row_bytes() : 0));
  }
};

// Throws Error unless the kernels support the shape: bits 4, block_size a power
// of two in [16, 256], N and K positive.
void check_supported(const NBitsShape& shape);

// A MatMulNBits weight as stored in the file (pointers into the initializers).
struct NBitsWeightsView {
  NBitsShape shape;
  const uint8_t* data = nullptr;         // B
  const float* scales = nullptr;         // N * k_blocks
  const uint8_t* zero_points = nullptr;  // null: symmetric (zero point 2^(bits-1))
};

enum class ScaleFormat { F32, F16 };

struct PackOptions {
  // Store the scales as fp16 when every one is zero or a normal fp16 number
  // (so each is rounded by at most 2^-11 relative, far below the int8
  // activation rounding of accuracy_level 4); otherwise keep fp32.
  bool compact_scales = true;
  // Where the packed bytes live (stream_memory.h).
  PageSize pages = PageSize::Huge;
  // Told, every few thousand rows and at the end, that the file rows
  // [begin, end) of B (and of the zero points) are packed and will not be
  // read again, so their memory can be given back while the rest is packed.
  std::function<void(int64_t begin, int64_t end)> rows_packed;
};

class PackedWeights {
 public:
  static constexpr int64_t kGroupRows = 16;
  static constexpr int64_t kChunkBytes = 64;
  static constexpr int64_t kChunkK = 8;  // k values per chunk (bits = 4)

  const NBitsShape& shape() const { return shape_; }
  bool asymmetric() const { return asymmetric_; }
  int default_zero_point() const { return 1 << (shape_.bits - 1); }
  ScaleFormat scale_format() const { return scale_format_; }

  int64_t groups() const { return (shape_.n + kGroupRows - 1) / kGroupRows; }
  int64_t payload_bytes() const { return shape_.block_size / kChunkK * kChunkBytes; }
  int64_t scale_bytes() const { return kGroupRows * (scale_format_ == ScaleFormat::F16 ? 2 : 4); }
  int64_t block_stride() const { return payload_bytes() + scale_bytes() + (asymmetric_ ? kGroupRows : 0); }
  int64_t group_stride() const { return block_stride() * shape_.k_blocks(); }
  int64_t bytes() const { return group_stride() * groups(); }

  const uint8_t* group(int64_t g) const { return data_.get() + g * group_stride(); }

 private:
  friend PackedWeights pack_weights(const NBitsWeightsView& view, const PackOptions& options);
  NBitsShape shape_;
  bool asymmetric_ = false;
  ScaleFormat scale_format_ = ScaleFormat::F32;
  std::shared_ptr<uint8_t> data_;  // allocate_stream_memory: zeroed
};

// Throws Error for an unsupported shape or missing pointers.
PackedWeights pack_weights(const NBitsWeightsView& view, const PackOptions& options = {});

}  // namespace deltagen::kernels
