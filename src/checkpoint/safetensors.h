// safetensors: 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the tensor bytes. Read through a read-only memory map.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace deltagen {

enum class DType { F32, F16, BF16 };
const char* dtype_name(DType d);  // "F32", "F16", "BF16"
size_t dtype_size(DType d);

struct TensorInfo {
  std::string name;              // as stored in the file
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr; // into the memory map
  size_t nbytes = 0;
  std::filesystem::path file;

  int64_t numel() const;
};

// Converts n elements of `dtype` at `src` to fp32 / fp64.
void convert_to_f32(DType dtype, const uint8_t* src, size_t n, float* dst);
void convert_to_f64(DType dtype, const uint8_t* src, size_t n, double* dst);

class SafetensorsFile {
 public:
  // Maps the file and validates the header: length bound, JSON, dtypes,
  // offsets inside the file, offsets matching shape x dtype size, no overlap.
  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

// One tensor to write. `data` must stay valid until write_safetensors returns.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// Streams a safetensors file: the header is written from the tensor list up
// front, then each tensor's bytes in the same order, so only one tensor needs
// to be in memory at a time. Atomic: nothing appears until commit().
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::filesystem::path& path, const std::vector<TensorToWrite>& layout,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  void write_next(const void* data, size_t nbytes);  // the next tensor of `layout`
  void commit();

 private:
  struct Impl;
  Impl* impl_;
};

// Writes atomically (temp file + rename). Tensors are laid out in the given order.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace deltagen
