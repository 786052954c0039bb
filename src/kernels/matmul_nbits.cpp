// The dispatcher: compiled for baseline x86-64; it reaches the per-ISA
// kernels only through kMatMulFamily (dispatch.h), which never hands out a
// table above what the CPU and OS support.
#include "kernels/matmul_nbits.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/quantize_activations.h"
#include "kernels/kernel_impls.h"

namespace deltagen::kernels {
namespace {

// Task sizes. Decode tasks cover ~16 KiB of weights: small enough that two
// threads end within a task of each other on a 0.3 MB matrix, large enough
// that the per-task cost (~1 µs in a pool) stays under a few percent.
constexpr int64_t kQ8TaskBytes = 16 << 10;
constexpr size_t kMaxTasks = 4096;
// The AMX task's dequantized weight panel stays in L2 (2 MB per core here)
// next to the 32-row block of A it is multiplied with.
constexpr int64_t kAmxPanelBytes = 512 << 10;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// body(g0, g1) over tasks of `per_task` groups (raised to keep the task count bounded).
template <typename Body>
void for_each_group_range(int64_t groups, int64_t per_task, const Parallel& parallel, Body body) {
  for_each_range(groups, std::max<int64_t>(per_task, ceil_div(groups, int64_t(kMaxTasks))), parallel, body);
}

// Multi-row calls (batch rows, verification, prefill) run the kernels' tiles
// of 3 groups: a task covers whole tiles.
constexpr int64_t kTileGroups = 3;
// Prefill tasks are (row block, group range) pairs: a row block's int8
// activations stay in L2 while the task's weights (~kPrefillTaskBytes, in L2
// too) pass over them.
constexpr int64_t kRowBlock = 64;
constexpr int64_t kPrefillTaskBytes = 96 << 10;

void run_q8(const MatMulKernels& kernels, const PackedWeights& w, const float* a, int64_t m, const float* bias,
            float* y, const Parallel& parallel, KernelLevel level, const MatMulConfig& config) {
  thread_local QuantizedRows quantized;  // reused call after call (decode: one row)
  // Every quantizer level gives the same bits; the cap applies to it too.
  const NBitsShape& s = w.shape();
  if (m > kRowBlock)
    quantize_rows(a, m, s.k, s.k, s.block_size, quantized, parallel, level);
  else
    quantize_rows(a, m, s.k, s.k, s.block_size, quantized, level);
  const detail::Q8GemmArgs args{&w, &quantized, bias, y, s.n, config.prefetch,
                                config.avx_vnni && cpu_features().avx_vnni};
  const auto kernel = kernels.gemm_q8;
  if (m <= kRowBlock) {
    // More rows per group = more work per group: keep tasks about equally long.
    int64_t per_task = std::max<int64_t>(1, kQ8TaskBytes / (w.group_stride() * std::max<int64_t>(1, m / 4)));
    if (m > 1) per_task = ceil_div(per_task, kTileGroups) * kTileGroups;
    for_each_group_range(w.groups(), per_task, parallel, [&](int64_t g0, int64_t g1) { kernel(args, g0, g1, 0, m); });
    return;
  }
  const int64_t row_blocks = ceil_div(m, kRowBlock);
  int64_t per_task = std::max<int64_t>(1, kPrefillTaskBytes / w.group_stride());
  per_task = std::max(per_task, ceil_div(w.groups() * row_blocks, int64_t(kMaxTasks)));
  per_task = ceil_div(per_task, kTileGroups) * kTileGroups;
  const int64_t group_ranges = ceil_div(w.groups(), per_task);
  // Row-block-major: tasks taken one after the other share their activations.
  parallel.run(size_t(row_blocks * group_ranges), [&](size_t t) {
    const int64_t g0 = int64_t(t) % group_ranges * per_task;
    const int64_t m0 = int64_t(t) / group_ranges * kRowBlock;
    kernel(args, g0, std::min(w.groups(), g0 + per_task), m0, std::min(m, m0 + kRowBlock));
  });
}

struct FreeAligned {
  void operator()(void* p) const { std::free(p); }
};

void run_amx(const MatMulKernels& kernels, const PackedWeights& w, const float* a, int64_t m, const float* bias, float* y,
             const Parallel& parallel) {
  const int64_t k = w.shape().k;
  const int64_t k_tiles = ceil_div(k, detail::kAmxTileK);
  const int64_t k_padded = k_tiles * detail::kAmxTileK;
  const int64_t m_padded = ceil_div(m, detail::kAmxRowBlock) * detail::kAmxRowBlock;

  thread_local std::unique_ptr<void, FreeAligned> a_buffer;
  thread_local int64_t a_capacity = 0;
  const int64_t a_bytes = m_padded * k_padded * int64_t(sizeof(uint16_t));
  if (a_bytes > a_capacity) {
    a_capacity = (a_bytes + 4095) / 4096 * 4096;
    a_buffer.reset(std::aligned_alloc(64, size_t(a_capacity)));
  }
  uint16_t* a_bf16 = static_cast<uint16_t*>(a_buffer.get());

  // A -> bf16, 32 rows per task; the padding rows are zeroed by the last task.
  const int64_t row_tasks = m_padded / detail::kAmxRowBlock;
  parallel.run(size_t(row_tasks), [&](size_t t) {
    const int64_t m0 = int64_t(t) * detail::kAmxRowBlock;
    const int64_t rows = std::min<int64_t>(detail::kAmxRowBlock, m - m0);
    kernels.convert_rows_bf16(a + m0 * k, rows, k, k, a_bf16 + m0 * k_padded, k_padded);
    if (rows < detail::kAmxRowBlock)
      std::fill(a_bf16 + (m0 + rows) * k_padded, a_bf16 + (m0 + detail::kAmxRowBlock) * k_padded, uint16_t(0));
  });

  const detail::AmxGemmArgs args{&w, a_bf16, m, m_padded, k_tiles, bias, y, w.shape().n};
  // Groups per task: as many as fit the panel budget, in pairs (2x2 tiles).
  int64_t per_task = kAmxPanelBytes / detail::amx_panel_bytes(w, k_tiles, 1);
  per_task = std::max<int64_t>(2, per_task / 2 * 2);
  for_each_group_range(w.groups(), per_task, parallel,
                       [&](int64_t g0, int64_t g1) { kernels.gemm_bf16(args, g0, g1); });
}

}  // namespace

const KernelFamily<MatMulKernels> kMatMulFamily{"matmul_nbits", {&kMatMulScalar, &kMatMulAvx2, &kMatMulAvx512, &kMatMulAmx}};

std::optional<MatMulPrefetch> parse_prefetch(std::string_view text) {
  MatMulPrefetch p;
  if (text.substr(0, 3) == "l1:") p.to_l2 = false;
  else if (text.substr(0, 3) != "l2:") return std::nullopt;
  const std::string_view digits = text.substr(3);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), p.distance);
  if (ec != std::errc() || end != digits.data() + digits.size() || p.distance < 0 || p.distance > (1 << 20))
    return std::nullopt;
  return p;
}

KernelLevel effective_level(int64_t m, const MatMulConfig& config) {
  KernelLevel level = usable_level(config.level);
  if (level == KernelLevel::Amx && m < config.amx_min_rows) level = KernelLevel::Avx512;
  return level;
}

void matmul_nbits(const PackedWeights& w, const float* a, int64_t m, const float* bias, float* y,
                  const Parallel& parallel, const MatMulConfig& config) {
  if (m <= 0) return;
  const KernelLevel level = effective_level(m, config);
  const MatMulKernels& kernels = kMatMulFamily.at(level);
  if (level == KernelLevel::Amx)
    run_amx(kernels, w, a, m, bias, y, parallel);
  else
    run_q8(kernels, w, a, m, bias, y, parallel, level, config);
}

}  // namespace deltagen::kernels
