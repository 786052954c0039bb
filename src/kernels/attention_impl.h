// The inner loops of attention.h, compiled for baseline x86-64
// (attention.cpp), AVX2 and AVX-512 (attention_avx2.cpp,
// attention_avx512.cpp, which write the inner blocks out with intrinsics in
// the same order of arithmetic). Dot products
// keep 16 independent partial sums so they vectorize without reassociating;
// internal linkage, so the copies never meet at link time.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "kernels/vector_math.h"

namespace deltagen::kernels {
namespace {

constexpr int kLanes = 16;

// One order of arithmetic for a query row's score against a key, whichever
// loop computes it (a prompt's rows against blocks of keys, or a decode
// step's few rows key by key): 16 partial sums, partial l over d = l, l+16,
// ... in order, then summed in a fixed tree (l + l+8, + l+4, + l+2, + l+1),
// times the scale. A row's result then does not depend on which other rows
// shared its task, so a prompt gives the same logits however it is split into
// runs (the prompt cache restores a state and runs the rest: the output must
// be the one a run from the start gives).
inline float tree_sum16(const float* p) {
  float s8[8], s4[4];
  for (int l = 0; l < 8; ++l) s8[l] = p[l] + p[l + 8];
  for (int l = 0; l < 4; ++l) s4[l] = s8[l] + s8[l + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

inline float score(const float* q, const float* k, int64_t n, float scale) {
  float part[kLanes] = {};
  for (int64_t d = 0; d < n; ++d) part[d % kLanes] += q[d] * k[d];
  return tree_sum16(part) * scale;
}

// Rotates the first R dims of x (two halves) for table row `row`.
inline void rope(float* x, const float* cos, const float* sin, int64_t rotary_dim) {
  const int64_t half = rotary_dim / 2;
  for (int64_t d = 0; d < half; ++d) {
    const float a = x[d], b = x[d + half];
    x[d] = a * cos[d] - b * sin[d];
    x[d + half] = b * cos[d] + a * sin[d];
  }
}

// Scores of `nq` query rows against keys [j0, j0 + 16), from a transposed
// block of the keys: one vector of 16 scores per query, no horizontal sums.
// The same arithmetic as score(), key by key.
inline void scores_block(const float* q, int64_t nq, int64_t hd, const float* kt, float scale, const int64_t* limit,
                         int64_t j0, float* scores, int64_t ld) {
  for (int64_t r = 0; r < nq; ++r) {
    if (j0 >= limit[r]) continue;  // every key of the block is after this query's position
    const float* qr = q + r * hd;
    float part[kLanes][kLanes] = {};  // [partial][key]
    for (int64_t d = 0; d < hd; ++d) {
      const float qd = qr[d];
      for (int l = 0; l < kLanes; ++l) part[d % kLanes][l] += qd * kt[d * kLanes + l];
    }
    for (int l = 0; l < kLanes; ++l) {
      float column[kLanes];
      for (int m = 0; m < kLanes; ++m) column[m] = part[m][l];
      scores[r * ld + j0 + l] = tree_sum16(column) * scale;
    }
  }
}

// Scores of a few rows (a decode step), key by key.
inline void scores_few(const float* q, int64_t nq, int64_t hd, const float* keys, int64_t n_max, float scale,
                       const int64_t* limit, float* scores, int64_t ld) {
  for (int64_t j = 0; j < n_max; ++j)
    for (int64_t r = 0; r < nq; ++r)
      if (j < limit[r]) scores[r * ld + j] = score(q + r * hd, keys + j * hd, hd, scale);
}

// out[rr][0..dims) = sum_{j < n} p[rr][j] value[j][d0 + ..], rows <= 4, dims <= 64.
inline void pv_block_loops(const float* scores, int64_t ld, int64_t rows, int64_t n, const float* values, int64_t hd,
                           int64_t dims, float (*block)[64]) {
  for (int64_t j = 0; j < n; ++j) {
    const float* value = values + j * hd;
    for (int64_t rr = 0; rr < rows; ++rr) {
      const float p = scores[rr * ld + j];
      for (int64_t d = 0; d < dims; ++d) block[rr][d] += p * value[d];
    }
  }
}

template <typename ScoresBlock, typename ScoresFew, typename PvBlock>
inline void attend(const AttentionTask& task, ScoresBlock scores_block, ScoresFew scores_few, PvBlock pv_block) {
  const AttentionShape& s = *task.s;
  const AttentionTensors& t = *task.t;
  const int64_t hd = s.head_dim, group = s.heads / s.kv_heads, half = s.rotary_dim / 2;
  const float* keys = t.k_cache + (task.b * s.kv_heads + task.g) * s.capacity * hd;
  const float* values = t.v_cache + (task.b * s.kv_heads + task.g) * s.capacity * hd;
  const int64_t first = int64_t(t.seqlens_k[task.b]) + 1 - s.seq;  // position of token 0
  // Query rows: token-major, the group's heads within a token; row r sees keys [0, limit[r]).
  const int64_t nq = (task.i1 - task.i0) * group, n_max = first + task.i1;
  const int64_t ld = (n_max + kLanes - 1) / kLanes * kLanes;
  std::vector<float> q(size_t(nq * hd)), scores(size_t(nq * ld));
  std::vector<int64_t> limit(static_cast<size_t>(nq));
  for (int64_t r = 0; r < nq; ++r) {
    const int64_t i = task.i0 + r / group, h = task.g * group + r % group, pos = first + i;
    const float* q_in = t.q + ((task.b * s.seq + i) * s.heads + h) * hd;
    std::copy(q_in, q_in + hd, q.begin() + r * hd);
    if (half > 0) rope(q.data() + r * hd, t.cos + pos * half, t.sin + pos * half, s.rotary_dim);
    limit[size_t(r)] = pos + 1;
  }

  // 1. Scores. Many query rows (a prompt): per block of 16 keys, transpose
  // the block once for all rows. A decode step's few rows: dot products.
  if (nq >= kLanes) {
    std::vector<float> kt(size_t(hd * kLanes));
    for (int64_t j0 = 0; j0 < n_max; j0 += kLanes) {
      const int64_t jn = std::min<int64_t>(kLanes, n_max - j0);
      for (int64_t l = 0; l < kLanes; ++l)
        for (int64_t d = 0; d < hd; ++d) kt[size_t(d * kLanes + l)] = l < jn ? keys[(j0 + l) * hd + d] : 0.0f;
      scores_block(q.data(), nq, hd, kt.data(), task.scale, limit.data(), j0, scores.data(), ld);
    }
  } else {
    scores_few(q.data(), nq, hd, keys, n_max, task.scale, limit.data(), scores.data(), ld);
  }

  // 2. Softmax per row over its own keys, normalized; the keys after a
  // row's position get probability 0, so step 3 needs no mask.
  for (int64_t r = 0; r < nq; ++r) {
    float* row = scores.data() + r * ld;
    const int64_t n = limit[size_t(r)];
    float top = row[0];
    for (int64_t j = 1; j < n; ++j) top = row[j] > top ? row[j] : top;
    for (int64_t j = 0; j < n; ++j) row[j] = exp_for_silu(row[j] - top);
    float part[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
      for (int l = 0; l < kLanes; ++l) part[l] += row[j + l];
    float sum = 0;
    for (int l = 0; l < kLanes; ++l) sum += part[l];
    for (; j < n; ++j) sum += row[j];
    const float inv = 1.0f / sum;
    for (j = 0; j < n; ++j) row[j] *= inv;
    for (; j < n_max; ++j) row[j] = 0.0f;
  }

  // 3. out = P V, in blocks of 4 rows x 64 dims (16 vector accumulators):
  // each value row is read once per block instead of once per query row.
  constexpr int64_t kRows = 4, kDims = 64;
  for (int64_t r0 = 0; r0 < nq; r0 += kRows) {
    const int64_t rows = std::min(kRows, nq - r0);
    const int64_t n = limit[size_t(r0 + rows - 1)];  // rows are in position order: the last sees most
    for (int64_t d0 = 0; d0 < hd; d0 += kDims) {
      const int64_t dims = std::min(kDims, hd - d0);
      float block[kRows][kDims] = {};
      pv_block(scores.data() + r0 * ld, ld, rows, n, values + d0, hd, dims, block);
      for (int64_t rr = 0; rr < rows; ++rr) {
        const int64_t r = r0 + rr, i = task.i0 + r / group, h = task.g * group + r % group;
        float* out = t.out + ((task.b * s.seq + i) * s.heads + h) * hd + d0;
        std::copy(block[rr], block[rr] + dims, out);
      }
    }
  }
}

inline void attend_with_loops(const AttentionTask& task) { attend(task, scores_block, scores_few, pv_block_loops); }

}  // namespace
}  // namespace deltagen::kernels
