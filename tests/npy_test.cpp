// Reading .npy files: the layouts numpy writes besides plain C-order floats
// (a transposed array is saved in Fortran order; images are uint8).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "util/npy.h"

namespace deltagen {
namespace {

std::string npy_bytes(const std::string& dict, const std::string& payload) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  const uint16_t n = uint16_t(header.size());
  return std::string("\x93NUMPY\x01\x00", 8) + std::string(reinterpret_cast<const char*>(&n), 2) + header + payload;
}

void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(Npy, FortranOrderIsReadInCOrder) {
  test::TempDir tmp;
  // The 2 x 3 matrix [[0, 1, 2], [3, 4, 5]] stored column by column.
  write_file(tmp / "f.npy", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                                            raw(std::vector<float>{0, 3, 1, 4, 2, 5})));
  NpyArray a = read_npy(tmp / "f.npy");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.as_f32(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  // Three axes: element (i, j, k) of a 2 x 2 x 2 array holding 4i + 2j + k,
  // at Fortran offset i + 2j + 4k.
  std::vector<int64_t> f(8);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 2; ++k) f[size_t(i + 2 * j + 4 * k)] = 4 * i + 2 * j + k;
  write_file(tmp / "g.npy", npy_bytes("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 2, 2), }", raw(f)));
  EXPECT_EQ(read_npy(tmp / "g.npy").as_i64(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Npy, Uint8AsInt64) {
  test::TempDir tmp;
  write_file(tmp / "u.npy", npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }",
                                            std::string("\x00\x7f\xff", 3)));
  NpyArray a = read_npy(tmp / "u.npy");
  EXPECT_EQ(a.as_i64(), (std::vector<int64_t>{0, 127, 255}));
  EXPECT_THROW(a.as_f32(), Error);
  // The payload must be there.
  write_file(tmp / "short.npy", npy_bytes("{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }", "ab"));
  EXPECT_THROW(read_npy(tmp / "short.npy"), Error);
}

}  // namespace
}  // namespace deltagen
