#include "models/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "quant/parallel.h"
#include "deltagen/error.h"
#include "util/half.h"
#include "util/mapped_pages.h"

namespace deltagen {
namespace {

using graph::DataType;

void drop_tensor_pages(const TensorInfo& t) { drop_mapped_pages(t.data, t.nbytes); }

// Checkpoint tensors [rows_i, cols] seen as one matrix stacked along rows.
class StackedRows {
 public:
  StackedRows(const Checkpoint& ckpt, const std::vector<std::string>& tensors) {
    for (const std::string& name : tensors) {
      const TensorInfo& t = ckpt.info(name);
      if (t.shape.size() != 2) fail(name, "expected a 2-D weight, got " + std::to_string(t.shape.size()) + " dims");
      if (!parts_.empty() && t.shape[1] != cols_)
        fail(name, "cannot be fused: " + std::to_string(t.shape[1]) + " columns, expected " + std::to_string(cols_));
      cols_ = t.shape[1];
      parts_.push_back(&t);
      rows_ += t.shape[0];
    }
  }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

  void read_row(int64_t r, float* dst) const {
    for (const TensorInfo* t : parts_) {
      if (r < t->shape[0]) {
        const size_t esize = dtype_size(t->dtype);
        convert_to_f32(t->dtype, t->data + size_t(r * cols_) * esize, size_t(cols_), dst);
        return;
      }
      r -= t->shape[0];
    }
  }
  void drop_pages() const {
    for (const TensorInfo* t : parts_) drop_tensor_pages(*t);
  }
  // Drops the mapped pages of rows [begin, end), which a pass has finished with.
  void drop_rows(int64_t begin, int64_t end) const {
    for (const TensorInfo* t : parts_) {
      const int64_t b = std::max<int64_t>(begin, 0), e = std::min<int64_t>(end, t->shape[0]);
      if (e > b) {
        const size_t row_bytes = size_t(cols_) * dtype_size(t->dtype);
        drop_mapped_pages(t->data + size_t(b) * row_bytes, size_t(e - b) * row_bytes);
      }
      begin -= t->shape[0];
      end -= t->shape[0];
    }
  }

 private:
  std::vector<const TensorInfo*> parts_;
  int64_t rows_ = 0, cols_ = 0;
};

void apply(ValueMap map, std::vector<float>& v) {
  switch (map) {
    case ValueMap::Identity: return;
    case ValueMap::PlusOne:
      for (float& x : v) x += 1.0f;
      return;
    case ValueMap::NegExp:
      for (float& x : v) x = -std::exp(x);
      return;
  }
}

std::vector<uint16_t> to_16bit(const std::vector<float>& v, DataType dtype) {
  std::vector<uint16_t> out(v.size());
  if (dtype == graph::kFloat16)
    for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_f16(v[i]);
  else
    for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

void check_float_dtype(DataType dtype, const std::string& what) {
  if (dtype != graph::kFloat && dtype != graph::kFloat16 && dtype != graph::kBFloat16)
    throw std::logic_error(what + ": weights must be float, float16 or bfloat16");
}

// Rows [begin, end) of `src` transposed into columns of `dst` [cols, rows],
// converted to T by `convert`.
template <class T, class Convert>
void transpose_rows(const StackedRows& src, int64_t begin, int64_t end, T* dst, Convert convert) {
  constexpr int64_t kBlock = 32;  // rows per pass: kBlock consecutive outputs per column
  const int64_t cols = src.cols(), rows = src.rows();
  std::vector<float> block(size_t(kBlock * cols));
  for (int64_t r0 = begin; r0 < end; r0 += kBlock) {
    const int64_t n = std::min(kBlock, end - r0);
    for (int64_t i = 0; i < n; ++i) src.read_row(r0 + i, &block[size_t(i * cols)]);
    src.drop_rows(r0, r0 + n);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t i = 0; i < n; ++i) dst[size_t(c * rows + r0 + i)] = convert(block[size_t(i * cols + c)]);
  }
}

}  // namespace

graph::WeightBuffer to_weight_buffer(std::vector<float> values, DataType dtype) {
  check_float_dtype(dtype, "to_weight_buffer");
  if (dtype == graph::kFloat) return graph::WeightBuffer(std::move(values));
  return graph::WeightBuffer(to_16bit(values, dtype));
}

graph::Initializer float_weight(const Checkpoint& ckpt, const std::string& tensor, const std::string& name,
                                DataType dtype, ValueMap map) {
  check_float_dtype(dtype, name);
  graph::Initializer init;
  init.name = name;
  init.dtype = dtype;
  init.dims = ckpt.info(tensor).shape;
  init.produce = [&ckpt, tensor, dtype, map]() -> graph::WeightBuffer {
    const TensorInfo& t = ckpt.info(tensor);
    const size_t count = size_t(t.numel()), esize = dtype_size(t.dtype);
    std::vector<float> f32_out;
    std::vector<uint16_t> u16_out;
    if (dtype == graph::kFloat)
      f32_out.resize(count);
    else
      u16_out.resize(count);
    // In slices straight into the output, releasing each slice's mapped pages
    // once converted: memory stays at the output tensor plus one slice.
    constexpr size_t kSlice = size_t(1) << 20;
    std::vector<float> slice;
    for (size_t begin = 0; begin < count; begin += kSlice) {
      const size_t n = std::min(kSlice, count - begin);
      slice.resize(n);
      convert_to_f32(t.dtype, t.data + begin * esize, n, slice.data());
      drop_mapped_pages(t.data + begin * esize, n * esize);
      apply(map, slice);
      if (dtype == graph::kFloat) {
        std::copy(slice.begin(), slice.end(), f32_out.begin() + begin);
      } else {
        std::vector<uint16_t> half = to_16bit(slice, dtype);
        std::copy(half.begin(), half.end(), u16_out.begin() + begin);
      }
    }
    drop_tensor_pages(t);
    if (dtype == graph::kFloat) return graph::WeightBuffer(std::move(f32_out));
    return graph::WeightBuffer(std::move(u16_out));
  };
  return init;
}

graph::Initializer matmul_weight(const Checkpoint& ckpt, const std::vector<std::string>& tensors,
                                 const std::string& name, DataType dtype, int threads) {
  check_float_dtype(dtype, name);
  StackedRows shape(ckpt, tensors);  // validates now, before anything is written
  graph::Initializer init;
  init.name = name;
  init.dtype = dtype;
  init.dims = {shape.cols(), shape.rows()};
  init.produce = [&ckpt, tensors, dtype, threads]() -> graph::WeightBuffer {
    StackedRows src(ckpt, tensors);
    const size_t count = size_t(src.rows() * src.cols());
    // Threads take disjoint row ranges = disjoint output columns.
    auto run = [&](auto* dst, auto convert) {
      quant::parallel_for(src.rows(), threads, 64,
                          [&](int64_t b, int64_t e) { transpose_rows(src, b, e, dst, convert); });
    };
    graph::WeightBuffer out;
    if (dtype == graph::kFloat) {
      std::vector<float> dst(count);
      run(dst.data(), [](float x) { return x; });
      out = graph::WeightBuffer(std::move(dst));
    } else {
      std::vector<uint16_t> dst(count);
      if (dtype == graph::kFloat16) run(dst.data(), [](float x) { return f32_to_f16(x); });
      else run(dst.data(), [](float x) { return f32_to_bf16(x); });
      out = graph::WeightBuffer(std::move(dst));
    }
    src.drop_pages();
    return out;
  };
  return init;
}

QuantizedWeight quantized_weight(const Checkpoint& ckpt, const std::vector<std::string>& tensors,
                                 const std::string& name, const quant::BlockFormat& format, DataType scale_dtype,
                                 int threads, const quant::FitOptions& fit) {
  quant::check_block_format(format);
  check_float_dtype(scale_dtype, name);
  StackedRows shape(ckpt, tensors);
  const int64_t n = shape.rows(), k = shape.cols();

  // One quantization pass feeds all three initializers; each takes its part
  // out, so memory is freed as they are written.
  struct Shared {
    std::optional<quant::QuantizedMatrix> result;
  };
  auto shared = std::make_shared<Shared>();
  auto get = [&ckpt, tensors, format, threads, shared, fit]() -> quant::QuantizedMatrix& {
    if (!shared->result) {
      StackedRows src(ckpt, tensors);
      shared->result = quant::quantize_matrix(
          src.rows(), src.cols(), format, fit, [&src](int64_t r, float* dst) { src.read_row(r, dst); }, threads,
          [&src](int64_t begin, int64_t end) { src.drop_rows(begin, end); });
      src.drop_pages();
    }
    return *shared->result;
  };

  QuantizedWeight w;
  w.n = n;
  w.k = k;
  const std::string suffix = format.bits == 4 ? "_Q4" : "_Q8";
  w.packed.name = name + suffix;
  w.packed.dtype = graph::kUInt8;
  w.packed.dims = {n, format.blocks_per_row(k), format.bytes_per_block()};
  w.packed.produce = [get]() { return graph::WeightBuffer(std::move(get().packed)); };

  w.scales.name = name + "_scales";
  w.scales.dtype = scale_dtype;
  w.scales.dims = {n, format.blocks_per_row(k)};
  w.scales.produce = [get, scale_dtype]() { return to_weight_buffer(std::move(get().scales), scale_dtype); };

  if (!format.symmetric) {
    w.zero_points.name = name + "_zero_points";
    w.zero_points.dtype = graph::kUInt8;
    w.zero_points.dims = {n, format.zero_point_row_bytes(k)};
    w.zero_points.produce = [get]() { return graph::WeightBuffer(std::move(get().zero_points)); };
  }
  return w;
}

graph::Initializer computed_weight(const std::string& name, const std::vector<int64_t>& dims,
                                   std::vector<float> values, DataType dtype) {
  if (int64_t(values.size()) != graph::numel_of(dims))
    throw std::logic_error("computed_weight: '" + name + "' has the wrong number of values");
  check_float_dtype(dtype, name);
  graph::Initializer init;
  init.name = name;
  init.dtype = dtype;
  init.dims = dims;
  init.produce = [values = std::move(values), dtype]() mutable { return to_weight_buffer(std::move(values), dtype); };
  return init;
}

graph::Initializer first_rows(const graph::Initializer& w, int64_t rows, const std::string& name) {
  if (w.dims.empty() || rows < 1 || rows > w.dims[0])
    fail(name, "cannot keep " + std::to_string(rows) + " rows of " + w.name);
  graph::Initializer out = w;
  out.name = name;
  out.dims[0] = rows;
  const size_t bytes = size_t(out.nbytes());
  out.produce = [produce = w.produce, bytes]() -> graph::WeightBuffer {
    const graph::WeightBuffer all = produce();
    return std::vector<uint8_t>(all.bytes(), all.bytes() + bytes);  // rows are contiguous: a prefix
  };
  return out;
}

graph::Initializer first_columns(const graph::Initializer& w, int64_t columns, const std::string& name) {
  if (w.dims.size() != 2 || columns < 1 || columns > w.dims[1])
    fail(name, "cannot keep " + std::to_string(columns) + " columns of " + w.name);
  graph::Initializer out = w;
  out.name = name;
  out.dims[1] = columns;
  const size_t element = size_t(graph::tensor_nbytes(w.dtype, 1)), row_in = size_t(w.dims[1]) * element,
               row_out = size_t(columns) * element, rows = size_t(w.dims[0]);
  out.produce = [produce = w.produce, row_in, row_out, rows]() -> graph::WeightBuffer {
    const graph::WeightBuffer all = produce();
    std::vector<uint8_t> kept(rows * row_out);
    for (size_t r = 0; r < rows; ++r) std::memcpy(kept.data() + r * row_out, all.bytes() + r * row_in, row_out);
    return kept;
  };
  return out;
}

QuantizedWeight first_rows(const QuantizedWeight& w, int64_t n, const std::string& suffix) {
  QuantizedWeight out = w;
  out.n = n;
  out.packed = first_rows(w.packed, n, w.packed.name + suffix);
  out.scales = first_rows(w.scales, n, w.scales.name + suffix);
  if (!w.zero_points.name.empty()) out.zero_points = first_rows(w.zero_points, n, w.zero_points.name + suffix);
  return out;
}

}  // namespace deltagen
