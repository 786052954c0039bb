#include "kernels/gemm_f32.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "kernels/gemm_f32_impl.h"

namespace deltagen::kernels {
namespace {

// Columns of B packed at a time: [kGemmDepth][kColumnChunk] floats = 256 KB,
// which stay in L2 while every row of A goes past them.
constexpr int64_t kColumnChunk = 256;

// Columns [j0, j0 + cols) of B, depth [d0, d0 + depth), as panels of
// [depth][panel] (zeros past the last column).
void pack_columns(const float* b, int64_t ldb, int64_t j0, int64_t cols, int64_t d0, int64_t depth, int64_t panel,
                  float* out) {
  for (int64_t p0 = 0; p0 < cols; p0 += panel) {
    float* dst = out + (p0 / panel) * depth * panel;
    const int64_t width = std::min(panel, cols - p0);
    for (int64_t j = 0; j < panel; ++j) {
      if (j >= width) {
        for (int64_t d = 0; d < depth; ++d) dst[d * panel + j] = 0.0f;
        continue;
      }
      const float* src = b + (j0 + p0 + j) * ldb + d0;
      for (int64_t d = 0; d < depth; ++d) dst[d * panel + j] = src[d];
    }
  }
}

}  // namespace

const GemmF32Kernels kGemmF32Scalar{KernelLevel::Scalar, GemmTile<4>::kPanel, GemmTile<4>::block};
const KernelFamily<GemmF32Kernels> kGemmF32Family{
    "gemm_f32", {&kGemmF32Scalar, &kGemmF32Avx2, &kGemmF32Avx512, &kGemmF32Avx512}};

void gemm_nt_f32(const float* a, const float* b, float* c, const GemmShape& s, bool accumulate, int threads,
                 KernelLevel level) {
  const GemmF32Kernels& kernels = kGemmF32Family.at(level);
  const int64_t lda = s.lda ? s.lda : s.k, ldb = s.ldb ? s.ldb : s.k, ldc = s.ldc ? s.ldc : s.n;
  if (s.m <= 0 || s.n <= 0) return;
  if (!accumulate)
    for (int64_t i = 0; i < s.m; ++i) std::fill(c + i * ldc, c + i * ldc + s.n, 0.0f);
  if (s.k <= 0) return;
  const int64_t chunks = (s.n + kColumnChunk - 1) / kColumnChunk;
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  // Tasks are (column chunk, row part): rows are split too when there are
  // fewer chunks than threads (a narrow product, e.g. one panel of a
  // factorization), in parts of whole register tiles.
  const int64_t row_parts = std::max<int64_t>(1, std::min<int64_t>(threads / chunks, s.m / 64));
  const int64_t tasks = chunks * row_parts;
  threads = int(std::min<int64_t>(threads, tasks));
  const int64_t part_rows = (s.m + row_parts - 1) / row_parts;
  // Thread t takes tasks t, t + threads, ...: interleaved, so that a
  // triangle's long and short chunks spread evenly. Each C entry is summed
  // by one task in one order, so the result does not depend on `threads`.
  auto work = [&](int t) {
    // Kept per thread between calls: GPTQ makes thousands of small products,
    // and a fresh 300 KB buffer each time cost more in page faults than the products.
    thread_local std::vector<float> packed;
    packed.resize(size_t(kGemmDepth * (kColumnChunk + kernels.panel)));
    for (int64_t task = t; task < tasks; task += threads) {
      const int64_t ch = task / row_parts, part = task % row_parts;
      const int64_t j0 = ch * kColumnChunk, cols = std::min(kColumnChunk, s.n - j0);
      const int64_t first = std::max(part * part_rows, s.lower ? std::min(j0, s.m) : 0);
      const int64_t last = std::min(s.m, (part + 1) * part_rows);
      if (first >= last) continue;
      for (int64_t d0 = 0; d0 < s.k; d0 += kGemmDepth) {
        const int64_t depth = std::min(kGemmDepth, s.k - d0);
        pack_columns(b, ldb, j0, cols, d0, depth, kernels.panel, packed.data());
        kernels.block(a + first * lda + d0, lda, packed.data(), depth, last - first, cols, c + first * ldc + j0, ldc,
                      s.alpha);
      }
    }
  };
  if (threads == 1) return work(0);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& th : pool) th.join();
}

}  // namespace deltagen::kernels
