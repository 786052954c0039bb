// The per-(batch row, value head) recurrence of gated_delta_net.h, written
// once in plain loops over the value dim (contiguous, so the compiler
// vectorizes them) and compiled three times: baseline x86-64
// (gated_delta_net.cpp), AVX2 and AVX-512 (gated_delta_net_avx2.cpp,
// gated_delta_net_avx512.cpp, built with those flags). Internal linkage, so the
// three copies never meet at link time.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/gated_delta_net.h"

namespace deltagen::kernels {
namespace {

// softplus as torch computes it (linear above 20).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// 1/||x|| (0 for a zero vector, which LpNormalization leaves at zero).
inline float inverse_l2(const float* x, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  return sum > 0 ? 1.0f / std::sqrt(sum) : 0.0f;
}

inline void gated_delta_head(const GatedDeltaHeadArgs& p, int64_t row, int64_t h) {
  const GatedDeltaShape& s = p.s;
  const int64_t dk = s.dk, dv = s.dv, c = s.conv_dim();
  const int64_t kh = h / (s.nv / s.nk);
  float* state = p.state + (row * s.nv + h) * dk * dv;  // [dk, dv]: row i belongs to key dim i
  float q[kMaxDeltaHeadDim], k[kMaxDeltaHeadDim], kv[kMaxDeltaHeadDim], delta[kMaxDeltaHeadDim],
      o[kMaxDeltaHeadDim];
  for (int64_t t = 0; t < s.seq; ++t) {
    const int64_t token = row * s.seq + t;
    const float* xc = p.xc + token * c;
    const float* q_in = xc + kh * dk;
    const float* k_in = xc + s.nk * dk + kh * dk;
    const float* v = xc + 2 * s.nk * dk + h * dv;
    const float q_mul = p.scale * inverse_l2(q_in, dk), k_mul = inverse_l2(k_in, dk);
    for (int64_t i = 0; i < dk; ++i) q[i] = q_in[i] * q_mul;
    for (int64_t i = 0; i < dk; ++i) k[i] = k_in[i] * k_mul;
    const float decay = std::exp(p.neg_exp_a[h] * softplus(p.a[token * s.nv + h] + p.dt_bias[h]));
    const float beta = 1.0f / (1.0f + std::exp(-p.b[token * s.nv + h]));

    // delta = beta (v - (decay S)^T k)
    for (int64_t j = 0; j < dv; ++j) kv[j] = 0;
    for (int64_t i = 0; i < dk; ++i) {
      const float ki = k[i];
      const float* srow = state + i * dv;
      for (int64_t j = 0; j < dv; ++j) kv[j] += srow[j] * ki;
    }
    for (int64_t j = 0; j < dv; ++j) delta[j] = beta * (v[j] - decay * kv[j]);

    // S <- decay S + k (x) delta;  o = S^T q
    for (int64_t j = 0; j < dv; ++j) o[j] = 0;
    for (int64_t i = 0; i < dk; ++i) {
      const float ki = k[i], qi = q[i];
      float* srow = state + i * dv;
      for (int64_t j = 0; j < dv; ++j) {
        const float updated = decay * srow[j] + ki * delta[j];
        srow[j] = updated;
        o[j] += updated * qi;
      }
    }

    // GatedRMSNorm over this head's dv values.
    float sum = 0;
    for (int64_t j = 0; j < dv; ++j) sum += o[j] * o[j];
    const float r = 1.0f / std::sqrt(sum / float(dv) + p.epsilon);
    const float* gate = p.silu_z + token * s.nv * dv + h * dv;
    float* out = p.out + token * s.nv * dv + h * dv;
    for (int64_t j = 0; j < dv; ++j) out[j] = o[j] * r * p.norm_w[j] * gate[j];
  }
}

}  // namespace
}  // namespace deltagen::kernels
