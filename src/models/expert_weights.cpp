#include "models/expert_weights.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "deltagen/error.h"
#include "quant/parallel.h"
#include "util/half.h"
#include "util/mapped_pages.h"

namespace deltagen {
namespace {

using graph::DataType;

// Row r of expert e's [N, K] matrix, in the order the graph stores it.
class ExpertRows {
 public:
  // Every expert's matrices are located once here: read_row runs once per
  // row (256 experts x 1024 rows per layer on 35B-A3B), the lookup by name need not.
  ExpertRows(const Checkpoint& ckpt, int64_t layer, ExpertFc fc) : fc_(fc) {
    experts_ = ckpt.config().num_experts;
    for (int64_t e = 0; e < experts_; ++e)
      for (ExpertPart p : {ExpertPart::Gate, ExpertPart::Up, ExpertPart::Down})
        parts_.push_back(ckpt.expert_matrix(layer, e, p));
    const ExpertMatrix& first = part(0, fc == ExpertFc::Fc1GateUp ? ExpertPart::Gate : ExpertPart::Down);
    rows_ = fc == ExpertFc::Fc1GateUp ? 2 * first.rows : first.rows;
    cols_ = first.cols;
  }
  int64_t experts() const { return experts_; }
  int64_t rows() const { return rows_; }  // N per expert
  int64_t cols() const { return cols_; }  // K

  void read_row(int64_t e, int64_t r, float* dst) const {
    // fc1 interleaved: gate 0, up 0, gate 1, up 1, ...
    const bool fc1 = fc_ == ExpertFc::Fc1GateUp;
    const ExpertMatrix& m = part(e, fc1 ? (r % 2 == 0 ? ExpertPart::Gate : ExpertPart::Up) : ExpertPart::Down);
    const int64_t row = fc1 ? r / 2 : r;
    convert_to_f32(m.dtype, m.data + size_t(row * m.cols) * dtype_size(m.dtype), size_t(m.cols), dst);
  }

  // Rows [begin, end) of expert e are read: their mapped pages stop counting
  // as this process's memory (whole pages only; they are read again if needed).
  void drop_rows(int64_t e, int64_t begin, int64_t end) const {
    for (ExpertPart p : {ExpertPart::Gate, ExpertPart::Up, ExpertPart::Down}) {
      if ((fc_ == ExpertFc::Fc2Down) != (p == ExpertPart::Down)) continue;
      const ExpertMatrix& m = part(e, p);
      const int64_t b = fc_ == ExpertFc::Fc1GateUp ? begin / 2 : begin;
      const int64_t n = (fc_ == ExpertFc::Fc1GateUp ? end / 2 : end) - b;
      const size_t row_bytes = size_t(m.cols) * dtype_size(m.dtype);
      if (n > 0) drop_mapped_pages(m.data + size_t(b) * row_bytes, size_t(n) * row_bytes);
    }
  }

 private:
  const ExpertMatrix& part(int64_t e, ExpertPart p) const { return parts_[size_t(e * 3 + int64_t(p))]; }

  std::vector<ExpertMatrix> parts_;  // [experts][gate, up, down]
  ExpertFc fc_;
  int64_t experts_ = 0, rows_ = 0, cols_ = 0;
};

}  // namespace

graph::Initializer expert_float_weight(const Checkpoint& ckpt, int64_t layer, ExpertFc fc, const std::string& name,
                                       DataType dtype) {
  const ExpertRows shape(ckpt, layer, fc);
  graph::Initializer init;
  init.name = name;
  init.dtype = dtype;
  init.dims = {shape.experts(), shape.rows(), shape.cols()};
  init.produce = [&ckpt, layer, fc, dtype]() -> graph::WeightBuffer {
    const ExpertRows src(ckpt, layer, fc);
    const int64_t E = src.experts(), N = src.rows(), K = src.cols();
    std::vector<float> f32(dtype == graph::kFloat ? size_t(E * N * K) : 0);
    std::vector<uint16_t> u16(dtype == graph::kFloat ? 0 : size_t(E * N * K));
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t r = 0; r < N; ++r) {
        const size_t at = size_t((e * N + r) * K);
        if (dtype == graph::kFloat) {
          src.read_row(e, r, &f32[at]);
          continue;
        }
        src.read_row(e, r, row.data());
        for (int64_t k = 0; k < K; ++k)
          u16[at + size_t(k)] = dtype == graph::kFloat16 ? f32_to_f16(row[size_t(k)]) : f32_to_bf16(row[size_t(k)]);
      }
      src.drop_rows(e, 0, N);
    }
    if (dtype == graph::kFloat) return graph::WeightBuffer(std::move(f32));
    return graph::WeightBuffer(std::move(u16));
  };
  return init;
}

QuantizedWeight expert_quantized_weight(const Checkpoint& ckpt, int64_t layer, ExpertFc fc, const std::string& name,
                                        const quant::BlockFormat& format, DataType scale_dtype, int threads) {
  quant::check_block_format(format);
  if (!format.symmetric) fail("--asymmetric", "the MoE experts are quantized symmetrically only");
  const ExpertRows shape(ckpt, layer, fc);
  const int64_t E = shape.experts(), N = shape.rows(), K = shape.cols();
  if (K % format.block_size != 0)
    fail(name, "the experts' input width " + std::to_string(K) + " is not a multiple of the block size " +
                   std::to_string(format.block_size));

  // One pass over the experts feeds both initializers.
  struct Shared {
    std::optional<quant::QuantizedMatrix> all;  // [E * N] rows
  };
  auto shared = std::make_shared<Shared>();
  auto get = [&ckpt, layer, fc, format, threads, shared]() -> quant::QuantizedMatrix& {
    if (!shared->all) {
      const ExpertRows src(ckpt, layer, fc);
      const int64_t n = src.rows();
      // Rows of every expert in one matrix: row e * N + r. Experts are
      // independent rows, so one call quantizes them all, in parallel.
      shared->all = quant::quantize_matrix(
          src.experts() * n, src.cols(), format,
          [&src, n](int64_t row, float* dst) { src.read_row(row / n, row % n, dst); }, threads,
          [&src, n](int64_t begin, int64_t end) {
            for (int64_t e = begin / n; e * n < end; ++e)
              src.drop_rows(e, std::max(begin - e * n, int64_t(0)), std::min(end - e * n, n));
          });
    }
    return *shared->all;
  };

  QuantizedWeight w;
  w.n = N;
  w.k = K;
  w.packed.name = name + (format.bits == 4 ? "_Q4" : "_Q8");
  w.packed.dtype = graph::kUInt8;
  w.packed.dims = {E, N, format.packed_row_bytes(K)};
  w.packed.produce = [get]() { return graph::WeightBuffer(std::move(get().packed)); };
  w.scales.name = name + "_scales";
  w.scales.dtype = scale_dtype;
  w.scales.dims = {E, N, format.blocks_per_row(K)};
  w.scales.produce = [get, scale_dtype]() { return to_weight_buffer(std::move(get().scales), scale_dtype); };
  return w;
}

}  // namespace deltagen
