#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "deltagen/error.h"
#include "util/half.h"
#include "util/number_text.h"

namespace deltagen {
namespace {

using nlohmann::json;

// A real header is a few hundred KB; anything far larger is corrupt or hostile.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

bool parse_dtype(const std::string& s, DType& d) {
  if (s == "F32") d = DType::F32;
  else if (s == "F16") d = DType::F16;
  else if (s == "BF16") d = DType::BF16;
  else return false;
  return true;
}

}  // namespace

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
  }
  return "?";
}

size_t dtype_size(DType d) { return d == DType::F32 ? 4 : 2; }

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

void convert_to_f32(DType dtype, const uint8_t* src, size_t n, float* dst) {
  switch (dtype) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
  }
}

void convert_to_f64(DType dtype, const uint8_t* src, size_t n, double* dst) {
  constexpr size_t kChunk = 4096;
  float buf[kChunk];
  for (size_t i = 0; i < n; i += kChunk) {
    size_t m = std::min(kChunk, n - i);
    convert_to_f32(dtype, src + i * dtype_size(dtype), m, buf);
    for (size_t j = 0; j < m; ++j) dst[i + j] = buf[j];
  }
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  const std::string file = path.string();
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(file, "cannot open (missing file?)");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(file, "not a regular file");
  }
  size_ = size_t(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    fail(file, "truncated safetensors file (" + std::to_string(size_) + " bytes, no header)");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    fail(file, "cannot memory-map");
  }
  const uint8_t* base = static_cast<const uint8_t*>(map_);
  uint64_t header_len = 0;
  std::memcpy(&header_len, base, 8);
  if (header_len > kMaxHeaderBytes) fail(file, "safetensors header length " + std::to_string(header_len) + " is absurd");
  if (header_len > size_ - 8)
    fail(file, "truncated safetensors file (header of " + std::to_string(header_len) + " bytes, file has " +
                   std::to_string(size_) + ")");
  json header;
  try {
    header = json::parse(base + 8, base + 8 + header_len);
  } catch (const json::exception&) {
    fail(file, "safetensors header is not valid JSON");
  }
  if (!header.is_object()) fail(file, "safetensors header is not a JSON object");

  const uint8_t* data = base + 8 + header_len;
  const uint64_t data_size = size_ - 8 - header_len;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      fail(file, "tensor " + name + ": header entry needs dtype, shape and data_offsets");
    TensorInfo t;
    t.name = name;
    t.file = path;
    const json& dt = entry["dtype"];
    if (!dt.is_string() || !parse_dtype(dt.get<std::string>(), t.dtype))
      fail(file, "tensor " + name + " has unsupported dtype " + dt.dump() + " (expected F32, F16 or BF16)");
    const json& shape = entry["shape"];
    if (!shape.is_array()) fail(file, "tensor " + name + ": shape is not a list");
    uint64_t numel = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) fail(file, "tensor " + name + ": shape holds a non-integer " + d.dump());
      uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > (uint64_t(1) << 62) / v) fail(file, "tensor " + name + ": shape size overflows");
      numel *= v;
      t.shape.push_back(int64_t(v));
    }
    const json& off = entry["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(file, "tensor " + name + ": data_offsets must be two non-negative integers");
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
      fail(file, "tensor " + name + ": data_offsets [" + std::to_string(begin) + "," + std::to_string(end) +
                     "] lie outside the file (truncated?)");
    if (end - begin != numel * dtype_size(t.dtype))
      fail(file, "tensor " + name + ": " + std::to_string(end - begin) + " bytes do not match shape " +
                     dims_text(t.shape) + " of " + dtype_name(t.dtype));
    t.data = data + begin;
    t.nbytes = size_t(end - begin);
    ranges.emplace_back(begin, end);
    tensors_.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) fail(file, "tensors overlap in the data section");
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

struct SafetensorsWriter::Impl {
  AtomicFile file;
  std::vector<size_t> sizes;
  std::vector<std::string> names;
  size_t next = 0;
  explicit Impl(const std::filesystem::path& p) : file(p) {}
};

SafetensorsWriter::SafetensorsWriter(const std::filesystem::path& path, const std::vector<TensorToWrite>& layout,
                                     const std::map<std::string, std::string>& metadata)
    : impl_(new Impl(path)) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : layout) {
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
    impl_->sizes.push_back(t.nbytes);
    impl_->names.push_back(t.name);
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // keep tensor data 8-byte aligned
  uint64_t len = h.size();
  auto& out = impl_->file.stream();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(h.data(), std::streamsize(h.size()));
}

SafetensorsWriter::~SafetensorsWriter() { delete impl_; }

void SafetensorsWriter::write_next(const void* data, size_t nbytes) {
  if (impl_->next >= impl_->sizes.size() || impl_->sizes[impl_->next] != nbytes)
    throw Error("safetensors writer: tensor written out of order or with the wrong size");
  impl_->file.stream().write(static_cast<const char*>(data), std::streamsize(nbytes));
  ++impl_->next;
}

void SafetensorsWriter::commit() {
  if (impl_->next != impl_->sizes.size()) throw Error("safetensors writer: not every tensor was written");
  impl_->file.commit();
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter w(path, tensors, metadata);
  for (const auto& t : tensors) w.write_next(t.data, t.nbytes);
  w.commit();
}

}  // namespace deltagen
