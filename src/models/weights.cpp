#include "models/weights.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "util/error.h"

namespace deltagen {

namespace {

// An fp32 initializer with the checkpoint tensor's shape (or `dims`), whose
// values are f(checkpoint values).
graph::Initializer mapped(const Checkpoint& ckpt, const std::string& tensor, const std::string& name,
                          std::vector<int64_t> dims, std::function<std::vector<float>(std::vector<float>)> f) {
  graph::Initializer init;
  init.name = name;
  init.dtype = graph::kFloat;
  init.dims = std::move(dims);
  init.produce = [&ckpt, tensor, f = std::move(f)]() { return graph::WeightBuffer(f(ckpt.load_f32(tensor))); };
  return init;
}

}  // namespace

std::vector<float> transpose_2d(const std::vector<float>& src, int64_t rows, int64_t cols) {
  std::vector<float> dst(src.size());
  constexpr int64_t kBlock = 64;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t r1 = std::min(rows, r0 + kBlock), c1 = std::min(cols, c0 + kBlock);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) dst[size_t(c * rows + r)] = src[size_t(r * cols + c)];
    }
  return dst;
}

graph::Initializer weight_as_is(const Checkpoint& ckpt, const std::string& tensor, const std::string& name) {
  return mapped(ckpt, tensor, name, ckpt.info(tensor).shape, [](std::vector<float> v) { return v; });
}

graph::Initializer weight_transposed(const Checkpoint& ckpt, const std::string& tensor, const std::string& name) {
  const auto& shape = ckpt.info(tensor).shape;
  if (shape.size() != 2) fail(tensor, "expected a 2-D weight, got " + std::to_string(shape.size()) + " dims");
  const int64_t rows = shape[0], cols = shape[1];
  return mapped(ckpt, tensor, name, {cols, rows},
                [rows, cols](std::vector<float> v) { return transpose_2d(v, rows, cols); });
}

graph::Initializer weight_plus_one(const Checkpoint& ckpt, const std::string& tensor, const std::string& name) {
  return mapped(ckpt, tensor, name, ckpt.info(tensor).shape, [](std::vector<float> v) {
    for (float& x : v) x += 1.0f;
    return v;
  });
}

graph::Initializer weight_neg_exp(const Checkpoint& ckpt, const std::string& tensor, const std::string& name) {
  return mapped(ckpt, tensor, name, ckpt.info(tensor).shape, [](std::vector<float> v) {
    for (float& x : v) x = -std::exp(x);
    return v;
  });
}

}  // namespace deltagen
