// NumPy .npy files: the golden outputs are stored in this format, and
// `--logits-out` writes it. Little-endian, dtypes <f4 <f8 <i8 <i4 |u1; a
// Fortran-order file is reordered to C order on read.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace deltagen {

struct NpyArray {
  std::string descr;             // e.g. "<f4"
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;    // raw little-endian payload

  int64_t numel() const;
  std::vector<float> as_f32() const;     // converts from f4/f8
  std::vector<double> as_f64() const;    // converts from f4/f8
  std::vector<int64_t> as_i64() const;   // converts from i4/i8/u1
};

NpyArray read_npy(const std::filesystem::path& path);  // throws Error

// Written to a temp file and renamed, so a failed write leaves nothing behind.
void write_npy_f32(const std::filesystem::path& path, const float* data,
                   const std::vector<int64_t>& shape);

}  // namespace deltagen
