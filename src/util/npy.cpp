#include "util/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "util/atomic_file.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

size_t descr_size(const std::string& d, const std::string& file) {
  if (d == "|u1") return 1;
  if (d == "<f4" || d == "<i4") return 4;
  if (d == "<f8" || d == "<i8") return 8;
  fail(file, "unsupported .npy dtype '" + d + "'");
}

// Finds the value text after 'key': in the header dict.
std::string dict_value(const std::string& header, const std::string& key, const std::string& file) {
  auto k = header.find("'" + key + "'");
  if (k == std::string::npos) fail(file, "malformed .npy header (no " + key + ")");
  auto colon = header.find(':', k);
  if (colon == std::string::npos) fail(file, "malformed .npy header");
  auto start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) fail(file, "malformed .npy header");
  char open = header[start];
  char close = open == '(' ? ')' : open == '\'' ? '\'' : ',';
  auto end = header.find(close, start + 1);
  if (end == std::string::npos) fail(file, "malformed .npy header");
  return header.substr(start, end - start + (close == ',' ? 0 : 1));
}

// A Fortran-order payload (numpy writes one for a transposed array)
// reordered to C order: element (i0, .., ik) moves from offset
// sum_j i_j * prod_{l<j} d_l to sum_j i_j * prod_{l>j} d_l.
std::vector<uint8_t> c_order(const std::vector<uint8_t>& fortran, const std::vector<int64_t>& shape, size_t element) {
  std::vector<uint8_t> out(fortran.size());
  const size_t k = shape.size(), n = element ? fortran.size() / element : 0;
  std::vector<int64_t> index(k, 0);  // the C-order multi-index of element c
  std::vector<size_t> stride(k, 1);  // Fortran strides, in elements
  for (size_t j = 1; j < k; ++j) stride[j] = stride[j - 1] * size_t(shape[j - 1]);
  for (size_t c = 0; c < n; ++c) {
    size_t f = 0;
    for (size_t j = 0; j < k; ++j) f += size_t(index[j]) * stride[j];
    std::memcpy(out.data() + c * element, fortran.data() + f * element, element);
    for (size_t j = k; j-- > 0;) {  // next C-order index: the last axis fastest
      if (++index[j] < shape[j]) break;
      index[j] = 0;
    }
  }
  return out;
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<float> NpyArray::as_f32() const {
  std::vector<float> out(numel());
  if (descr == "<f4") {
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 4);
  } else if (descr == "<f8") {
    const double* p = reinterpret_cast<const double*>(bytes.data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = float(p[i]);
  } else {
    throw Error("npy: cannot read dtype " + descr + " as float");
  }
  return out;
}

std::vector<double> NpyArray::as_f64() const {
  std::vector<double> out(numel());
  if (descr == "<f8") {
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 8);
  } else {
    auto f = as_f32();
    for (size_t i = 0; i < out.size(); ++i) out[i] = f[i];
  }
  return out;
}

std::vector<int64_t> NpyArray::as_i64() const {
  std::vector<int64_t> out(numel());
  if (descr == "<i8") {
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 8);
  } else if (descr == "<i4") {
    const int32_t* p = reinterpret_cast<const int32_t*>(bytes.data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = p[i];
  } else if (descr == "|u1") {
    for (size_t i = 0; i < out.size(); ++i) out[i] = bytes[i];
  } else {
    throw Error("npy: cannot read dtype " + descr + " as int64");
  }
  return out;
}

NpyArray read_npy(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(file, "cannot open");
  char magic[8];
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(file, "not a .npy file");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t l = 0;
    in.read(reinterpret_cast<char*>(&l), 2);
    header_len = l;
  } else {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  }
  if (!in || header_len > (1u << 20)) fail(file, "malformed .npy header");
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  if (!in) fail(file, "truncated .npy header");

  NpyArray a;
  std::string descr = dict_value(header, "descr", file);
  a.descr = descr.substr(1, descr.size() - 2);
  const bool fortran = dict_value(header, "fortran_order", file).find("True") != std::string::npos;
  std::string shape = dict_value(header, "shape", file);
  std::stringstream ss(shape.substr(1, shape.size() - 2));
  std::string item;
  uint64_t numel = 1;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    int64_t dim = -1;
    try {
      size_t end = 0;
      dim = std::stoll(item, &end);
      if (item.find_first_not_of(' ', end) != std::string::npos) dim = -1;
    } catch (const std::logic_error&) {  // not a number, or out of range
    }
    if (dim < 0) fail(file, "malformed .npy shape " + shape);
    if (dim != 0 && numel > (uint64_t(1) << 62) / uint64_t(dim)) fail(file, ".npy shape " + shape + " is too large");
    numel *= uint64_t(dim);
    a.shape.push_back(dim);
  }
  // The payload must be in the file: checked before anything is allocated for it.
  const size_t element = descr_size(a.descr, file);
  const std::streamoff data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streamoff file_size = in.tellg();
  in.seekg(data_start);
  if (numel > uint64_t(file_size - data_start) / element) fail(file, "truncated .npy data");
  size_t nbytes = size_t(numel) * element;
  a.bytes.resize(nbytes);
  in.read(reinterpret_cast<char*>(a.bytes.data()), std::streamsize(nbytes));
  if (!in) fail(file, "truncated .npy data");
  if (fortran && a.shape.size() > 1) a.bytes = c_order(a.bytes, a.shape, element);
  return a;
}

void write_npy_f32(const std::filesystem::path& path, const float* data,
                   const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
    n *= shape[i];
  }
  dict += "), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  AtomicFile f(path);
  auto& out = f.stream();
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t hl = uint16_t(dict.size());
  out.write(reinterpret_cast<const char*>(&hl), 2);
  out.write(dict.data(), std::streamsize(dict.size()));
  out.write(reinterpret_cast<const char*>(data), std::streamsize(n * 4));
  f.commit();
}

}  // namespace deltagen
