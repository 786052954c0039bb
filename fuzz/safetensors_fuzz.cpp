// Fuzzes the safetensors reader (SafetensorsFile): the 8-byte header length,
// the JSON header and the tensor table it describes. The reader maps a file,
// so each input is written to a scratch file first.
//
// Beyond "no crash, only deltagen::Error", an independent oracle: for every
// tensor the reader accepts, the header's own data_offsets (re-read here)
// must lie inside the data section, match shape x dtype, and agree with the
// pointer the reader hands out. Small tensors are also converted, so ASan
// sees the conversions' writes.
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "checkpoint/safetensors.h"
#include "fuzz_util.h"

using namespace deltagen;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = fuzz::write_scratch("model.safetensors", data, size);
  fuzz::expect_only_error("SafetensorsFile", [&] {
    SafetensorsFile file(path);
    if (file.tensors().empty()) return;
    // Accepted, so the first 8 + header_len bytes are a JSON object.
    uint64_t header_len;
    std::memcpy(&header_len, data, 8);
    const auto header = nlohmann::json::parse(data + 8, data + 8 + header_len);
    const uint64_t data_size = size - 8 - header_len;

    const TensorInfo* first = nullptr;
    uint64_t first_begin = 0;
    for (const auto& [name, t] : file.tensors()) {
      const auto& offsets = header.at(name).at("data_offsets");
      const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
      if (begin > end || end > data_size) fuzz::finding("tensor " + name + " accepted outside the data section");
      if (t.nbytes != end - begin) fuzz::finding("tensor " + name + ": nbytes differs from data_offsets");
      if (t.numel() < 0 || uint64_t(t.numel()) * dtype_size(t.dtype) != t.nbytes)
        fuzz::finding("tensor " + name + ": nbytes does not match shape x dtype");
      if (!first) {
        first = &t;
        first_begin = begin;
      } else if (t.data - first->data != int64_t(begin) - int64_t(first_begin)) {
        fuzz::finding("tensor " + name + ": data pointer disagrees with data_offsets");
      }
      if (t.numel() <= 4096) {
        std::vector<float> f(size_t(t.numel()));
        convert_to_f32(t.dtype, t.data, f.size(), f.data());
        std::vector<double> d(size_t(t.numel()));
        convert_to_f64(t.dtype, t.data, d.size(), d.data());
      }
    }
  });
  return 0;
}
