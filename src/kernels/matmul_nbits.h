// Y = A · dequant(W)ᵀ (+ bias) for MatMulNBits weights repacked by
// pack_weights(), on the fastest kernel family this CPU has:
//   M <  amx_min_rows (decode):  int8-quantized A (per weight block, as
//        accuracy_level 4), VPDPBUSD over the packed nibbles (AVX-512 VNNI;
//        AVX2 and scalar fallbacks compute the same integers);
//   M >= amx_min_rows (prefill): A and dequantized weights in bf16, AMX tiles
//        with fp32 accumulation (when the CPU and OS allow AMX).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/cpu_features.h"
#include "kernels/packed_weights.h"
#include "kernels/parallel.h"

namespace deltagen::kernels {

// How the AVX-512 GEMV prefetches its weight stream. Into L2 (prefetcht2),
// 8 KiB ahead: the request then waits in L2's queue, not in one of L1's ~16
// fill buffers, so more lines are in flight per core. Measured against L1 at
// 4 KiB (the earlier default), paired in one process: decode x1.06 on the 0.8B
// model, x1.04 on 2B (docs/performance.md 1.14).
struct MatMulPrefetch {
  int64_t distance = 8192;  // bytes ahead of the record being read
  bool to_l2 = true;        // false: prefetcht0 (into L1)
};

// "l1:BYTES" or "l2:BYTES" (BYTES in [0, 1 MiB]); nullopt when malformed.
std::optional<MatMulPrefetch> parse_prefetch(std::string_view text);

struct MatMulConfig {
  KernelLevel level = default_level();  // a cap: lowered to what the CPU supports
  int64_t amx_min_rows = 16;            // from bench/ (docs/performance.md)
  MatMulPrefetch prefetch;
  bool avx_vnni = true;  // a cap, like level: the AVX2 table's tiles use AVX-VNNI where the CPU has it
};

// a: m x K floats, row-major; y: m x N floats; bias: N floats or null.
void matmul_nbits(const PackedWeights& w, const float* a, int64_t m, const float* bias, float* y,
                  const Parallel& parallel, const MatMulConfig& config = {});

// Which path matmul_nbits() takes for m rows under `config` (for tests and logs).
KernelLevel effective_level(int64_t m, const MatMulConfig& config);

}  // namespace deltagen::kernels
