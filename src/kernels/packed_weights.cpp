#include "kernels/packed_weights.h"

#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include "deltagen/error.h"
#include "util/half.h"

namespace deltagen::kernels {
namespace {

// 16 bits = nibbles n0..n3 -> 32 bits with n_i in the low nibble of byte i.
uint32_t spread_nibbles(uint32_t x) {
  x = (x | (x << 8)) & 0x00ff00ffu;
  x = (x | (x << 4)) & 0x0f0f0f0fu;
  return x;
}

// Four file bytes (k = 8c..8c+7, low nibble first) -> one packed lane:
// byte i = q[8c+i] | q[8c+4+i] << 4.
uint32_t file_word_to_lane(uint32_t word) {
  return spread_nibbles(word & 0xffffu) | (spread_nibbles(word >> 16) << 4);
}

bool fits_fp16(float s) {
  if (s == 0.0f) return true;
  const float a = std::fabs(s);
  return std::isfinite(a) && a >= 0x1p-14f && a <= 65504.0f;
}

}  // namespace

void check_supported(const NBitsShape& shape) {
  const std::string subject = "MatMulNBits";
  if (shape.bits != 4) fail(subject, "bits=" + std::to_string(shape.bits) + " is not supported (4 only)");
  const int bs = shape.block_size;
  if (bs < 16 || bs > 256 || (bs & (bs - 1)) != 0)
    fail(subject, "block_size=" + std::to_string(bs) + " is not a power of two in [16, 256]");
  if (shape.n <= 0 || shape.k <= 0) fail(subject, "N and K must be positive");
}

PackedWeights pack_weights(const NBitsWeightsView& view, const PackOptions& options) {
  const NBitsShape& s = view.shape;
  check_supported(s);
  if (!view.data || !view.scales) fail("MatMulNBits", "weights or scales missing");

  PackedWeights w;
  w.shape_ = s;
  w.asymmetric_ = view.zero_points != nullptr;
  const int64_t kb = s.k_blocks();
  const int64_t scale_count = s.n * kb;
  bool compact = options.compact_scales;
  for (int64_t i = 0; compact && i < scale_count; ++i) compact = fits_fp16(view.scales[i]);
  w.scale_format_ = compact ? ScaleFormat::F16 : ScaleFormat::F32;

  // Zeroed: padded rows keep zero weights and zero scales.
  try {
    w.data_ = allocate_stream_memory(size_t(w.bytes()), options.pages);
  } catch (const std::bad_alloc&) {
    fail("MatMulNBits", "out of memory packing " + std::to_string(w.bytes()) + " bytes");
  }

  const int64_t file_block = s.file_block_bytes();
  const int64_t chunks = s.block_size / PackedWeights::kChunkK;
  const int64_t zp_row = s.zero_point_row_bytes();
  constexpr int64_t kReportGroups = 256;  // 4096 rows between rows_packed calls
  int64_t reported = 0;
  for (int64_t g = 0; g < w.groups(); ++g) {
    if (options.rows_packed && g > 0 && g % kReportGroups == 0) {
      options.rows_packed(reported, g * PackedWeights::kGroupRows);
      reported = g * PackedWeights::kGroupRows;
    }
    uint8_t* record = w.data_.get() + g * w.group_stride();
    for (int64_t b = 0; b < kb; ++b, record += w.block_stride()) {
      uint8_t* scales = record + w.payload_bytes();
      uint8_t* zps = scales + w.scale_bytes();
      for (int64_t r = 0; r < PackedWeights::kGroupRows; ++r) {
        const int64_t n = g * PackedWeights::kGroupRows + r;
        if (n >= s.n) break;
        const uint8_t* src = view.data + (n * kb + b) * file_block;
        for (int64_t c = 0; c < chunks; ++c) {
          uint32_t word;
          std::memcpy(&word, src + 4 * c, 4);
          const uint32_t lane = file_word_to_lane(word);
          std::memcpy(record + c * PackedWeights::kChunkBytes + 4 * r, &lane, 4);
        }
        const float scale = view.scales[n * kb + b];
        if (compact) {
          const uint16_t h = f32_to_f16(scale);
          std::memcpy(scales + 2 * r, &h, 2);
        } else {
          std::memcpy(scales + 4 * r, &scale, 4);
        }
        if (w.asymmetric_) {
          const uint8_t byte = view.zero_points[n * zp_row + b / 2];
          zps[r] = (b % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
        }
      }
    }
  }
  if (options.rows_packed && reported < s.n) options.rows_packed(reported, s.n);
  return w;
}

}  // namespace deltagen::kernels
