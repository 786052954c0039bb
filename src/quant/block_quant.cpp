#include "quant/block_quant.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "quant/parallel.h"
#include "deltagen/error.h"

namespace deltagen::quant {
namespace {

// Round half to even (the default FP rounding mode), like numpy's round.
float round_to_nearest(float x) { return std::nearbyint(x); }

void quantize_block_symmetric(const float* w, int64_t n, const BlockFormat& f, uint8_t* codes, float& scale) {
  float largest = 0.0f, largest_abs = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (std::fabs(w[i]) > largest_abs) {
      largest_abs = std::fabs(w[i]);
      largest = w[i];
    }
  const int half = f.implicit_zero_point();
  scale = largest / float(-half);
  for (int64_t i = 0; i < n; ++i) {
    const float q = scale != 0.0f ? round_to_nearest(w[i] / scale) : 0.0f;
    codes[i] = uint8_t(std::clamp(q, float(-half), float(half - 1)) + float(half));
  }
}

void quantize_block_asymmetric(const float* w, int64_t n, const BlockFormat& f, uint8_t* codes, float& scale,
                               uint8_t& zero_point) {
  float lo = 0.0f, hi = 0.0f;  // the range always holds 0, so 0 is exact
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  const float max_code = float(f.max_code());
  scale = (hi - lo) / max_code;
  const float zp = scale != 0.0f ? std::clamp(round_to_nearest(-lo / scale), 0.0f, max_code) : 0.0f;
  zero_point = uint8_t(zp);
  for (int64_t i = 0; i < n; ++i) {
    const float q = scale != 0.0f ? round_to_nearest(w[i] / scale) + zp : zp;
    codes[i] = uint8_t(std::clamp(q, 0.0f, max_code));
  }
}

}  // namespace

void check_block_format(const BlockFormat& f) {
  if (f.bits != 4 && f.bits != 8) fail("quantization", "bits must be 4 or 8, got " + std::to_string(f.bits));
  const int64_t b = f.block_size;
  if (b < 16 || b > 256 || (b & (b - 1)) != 0)
    fail("--block-size", "must be 16, 32, 64, 128 or 256, got " + std::to_string(b));
}

void quantize_row(const float* row, int64_t k, const BlockFormat& f, uint8_t* codes, float* scales,
                  uint8_t* zero_points) {
  const int64_t bs = f.block_size, blocks = f.blocks_per_row(k);
  std::vector<float> padded(size_t(bs), 0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * bs, n = std::min(bs, k - begin);
    std::fill(padded.begin(), padded.end(), 0.0f);
    std::copy(row + begin, row + begin + n, padded.begin());
    uint8_t* block_codes = codes + b * bs;
    if (f.symmetric) {
      quantize_block_symmetric(padded.data(), bs, f, block_codes, scales[b]);
      zero_points[b] = uint8_t(f.implicit_zero_point());
    } else {
      quantize_block_asymmetric(padded.data(), bs, f, block_codes, scales[b], zero_points[b]);
    }
  }
}

void pack_codes(const uint8_t* codes, int64_t count, int bits, uint8_t* packed) {
  if (bits == 8) {
    std::copy(codes, codes + count, packed);
    return;
  }
  for (int64_t i = 0; i < count; i += 2) {
    const uint8_t low = codes[i] & 0x0f, high = i + 1 < count ? codes[i + 1] & 0x0f : 0;
    packed[i / 2] = uint8_t(low | (high << 4));
  }
}

uint8_t unpack_code(const uint8_t* packed, int64_t index, int bits) {
  if (bits == 8) return packed[index];
  const uint8_t byte = packed[index / 2];
  return index % 2 == 0 ? byte & 0x0f : byte >> 4;
}

QuantizedMatrix quantize_matrix(int64_t rows, int64_t cols, const BlockFormat& format, const RowSource& source,
                                int threads, const RowsDone& rows_done) {
  return quantize_matrix(rows, cols, format, source, threads, rows_done,
                         [&format, cols](float* values, int64_t count, uint8_t* codes, float* scales,
                                         uint8_t* zero_points) {
                           const int64_t blocks = format.blocks_per_row(cols);
                           for (int64_t r = 0; r < count; ++r)
                             quantize_row(values + r * cols, cols, format, codes + r * blocks * format.block_size,
                                          scales + r * blocks, zero_points + r * blocks);
                         });
}

QuantizedMatrix quantize_matrix(int64_t rows, int64_t cols, const BlockFormat& format, const RowSource& source,
                                int threads, const RowsDone& rows_done, const RowQuantizer& fit_rows) {
  check_block_format(format);
  QuantizedMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.format = format;
  const int64_t blocks = format.blocks_per_row(cols), row_bytes = format.packed_row_bytes(cols);
  const int64_t zp_bytes = format.zero_point_row_bytes(cols), row_codes = blocks * format.block_size;
  m.packed.resize(size_t(rows * row_bytes));
  m.scales.resize(size_t(rows * blocks));
  if (!format.symmetric) m.zero_points.resize(size_t(rows * zp_bytes));

  parallel_for(rows, threads, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> values(static_cast<size_t>(kRowsPerFit * cols));
    std::vector<uint8_t> codes(static_cast<size_t>(kRowsPerFit * row_codes));
    std::vector<uint8_t> zero_points(static_cast<size_t>(kRowsPerFit * blocks));
    constexpr int64_t kReportEvery = 256;
    int64_t reported = begin;
    for (int64_t r0 = begin; r0 < end; r0 += kRowsPerFit) {
      if (rows_done && r0 - reported >= kReportEvery) {
        rows_done(reported, r0);
        reported = r0;
      }
      const int64_t count = std::min(kRowsPerFit, end - r0);
      for (int64_t i = 0; i < count; ++i) source(r0 + i, &values[size_t(i * cols)]);
      fit_rows(values.data(), count, codes.data(), &m.scales[size_t(r0 * blocks)], zero_points.data());
      for (int64_t i = 0; i < count; ++i) {
        const int64_t r = r0 + i;
        pack_codes(&codes[size_t(i * row_codes)], row_codes, format.bits, &m.packed[size_t(r * row_bytes)]);
        if (!format.symmetric)
          pack_codes(&zero_points[size_t(i * blocks)], blocks, format.bits, &m.zero_points[size_t(r * zp_bytes)]);
      }
    }
    if (rows_done) rows_done(reported, end);
  });
  return m;
}

std::vector<float> dequantize_matrix(const QuantizedMatrix& m) {
  const BlockFormat& f = m.format;
  const int64_t blocks = f.blocks_per_row(m.cols), row_bytes = f.packed_row_bytes(m.cols);
  const int64_t zp_bytes = f.zero_point_row_bytes(m.cols);
  std::vector<float> out(size_t(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    const uint8_t* codes = &m.packed[size_t(r * row_bytes)];
    for (int64_t c = 0; c < m.cols; ++c) {
      const int64_t b = c / f.block_size;
      const float zero_point =
          f.symmetric ? float(f.implicit_zero_point())
                      : float(unpack_code(&m.zero_points[size_t(r * zp_bytes)], b, f.bits));
      out[size_t(r * m.cols + c)] = (float(unpack_code(codes, c, f.bits)) - zero_point) * m.scales[size_t(r * blocks + b)];
    }
  }
  return out;
}

}  // namespace deltagen::quant
