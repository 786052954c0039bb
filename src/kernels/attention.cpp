#include "kernels/attention.h"

#include <algorithm>
#include <string>

#include "kernels/attention_impl.h"
#include "deltagen/error.h"

namespace deltagen::kernels {

const AttentionKernels kAttentionScalar{KernelLevel::Scalar, attend_with_loops};
const KernelFamily<AttentionKernels> kAttentionFamily{
    "attention", {&kAttentionScalar, &kAttentionAvx2, &kAttentionAvx512, &kAttentionAvx512}};

void attention(const AttentionShape& s, float scale, const AttentionTensors& t, const Parallel& parallel,
               KernelLevel level) {
  const int64_t hd = s.head_dim, half = s.rotary_dim / 2;
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t first = int64_t(t.seqlens_k[b]) + 1 - s.seq, last = first + s.seq - 1;
    if (first < 0 || last >= s.capacity || (half > 0 && last >= s.rotary_positions))
      fail("attention", "position " + std::to_string(last) + " outside the cache or the rotary tables");
  }
  // 1. New keys (rotated) and values into the cache.
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t first = int64_t(t.seqlens_k[b]) + 1 - s.seq;
    for (int64_t i = 0; i < s.seq; ++i)
      for (int64_t g = 0; g < s.kv_heads; ++g) {
        const int64_t pos = first + i, src = ((b * s.seq + i) * s.kv_heads + g) * hd;
        float* key = t.k_cache + ((b * s.kv_heads + g) * s.capacity + pos) * hd;
        std::copy(t.k + src, t.k + src + hd, key);
        if (half > 0) rope(key, t.cos + pos * half, t.sin + pos * half, s.rotary_dim);
        std::copy(t.v + src, t.v + src + hd, t.v_cache + ((b * s.kv_heads + g) * s.capacity + pos) * hd);
      }
  }
  // 2. One task per (row, kv head, block of 32 tokens): a decode step is one
  // task per kv head, its keys and values read once for the group's queries.
  const int64_t block = 32, blocks = (s.seq + block - 1) / block;
  const auto fn = kAttentionFamily.at(level).attend;
  parallel.run(size_t(s.batch * s.kv_heads * blocks), [&](size_t index) {
    const int64_t blk = int64_t(index) % blocks, bg = int64_t(index) / blocks;
    const int64_t i0 = blk * block;
    fn(AttentionTask{&s, &t, scale, bg / s.kv_heads, bg % s.kv_heads, i0, std::min(s.seq, i0 + block)});
  });
}

}  // namespace deltagen::kernels
