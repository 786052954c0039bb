// The Gated DeltaNet token mixer of a Qwen3.5 linear-attention layer, from the
// in_proj outputs to the input of out_proj, as one kernel. It computes what
// this chain of ONNX nodes computes (the builder's default fp32 form):
//
//   x [B,S,C] -> CausalConvWithState(+SiLU, state conv_past) -> Split -> q, k, v
//   q, k -> per-head LpNormalization (p 2)           (q also times `scale`)
//   a, b -> LinearAttentionGate -> g = neg_exp_a * softplus(a + dt_bias), beta = sigmoid(b)
//   LinearAttention(gated_delta):  S = e^g S;  delta = beta (v - S^T k);  S += k (x) delta;  o = S^T q
//   GatedRMSNorm(o, norm_w, z):    o * rsqrt(mean(o^2) + eps) * norm_w * silu(z)   per value head
//
// with C = 2 nk dk + nv dv; value head h reads key head h / (nv / nk).
// Decode runs ~13 ONNX nodes per layer for a few µs of arithmetic each; here
// it is one pass over the recurrent state per head, heads spread over threads.
#pragma once
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace deltagen::kernels {

struct GatedDeltaShape {
  int64_t batch = 1, seq = 1;
  int64_t nk = 0, nv = 0, dk = 0, dv = 0;  // key heads, value heads, their dims
  int64_t conv_kernel = 0;                 // K: the conv state keeps K-1 inputs
  int64_t conv_dim() const { return 2 * nk * dk + nv * dv; }
};

// The largest head dims the kernel takes (its per-head scratch lives on the stack).
constexpr int64_t kMaxDeltaHeadDim = 512;

struct GatedDeltaTensors {
  const float* x = nullptr;          // [B, S, C]   the conv's input, channels last
  const float* conv_w_t = nullptr;   // [K, C]      the conv taps, transposed (tap-major)
  const float* conv_past = nullptr;  // [B, C, K-1] or null (zeros)
  float* conv_present = nullptr;     // [B, C, K-1] may alias conv_past
  const float* z = nullptr;          // [B, S, nv*dv]
  const float* a = nullptr;          // [B, S, nv]
  const float* b = nullptr;          // [B, S, nv]
  const float* dt_bias = nullptr;    // [nv]
  const float* neg_exp_a = nullptr;  // [nv]  -exp(A_log)
  const float* state_past = nullptr; // [B, nv, dk, dv] or null (zeros)
  float* state_present = nullptr;    // [B, nv, dk, dv] may alias state_past
  const float* norm_w = nullptr;     // [dv]
  float* out = nullptr;              // [B, S, nv*dv]
  // > 0: x, z, a and b are column ranges of one [B, S, in_stride] tensor (the
  // in_proj output, read without its Split), so consecutive tokens of each
  // are in_stride floats apart.
  int64_t in_stride = 0;
  int64_t x_stride(const GatedDeltaShape& s) const { return in_stride ? in_stride : s.conv_dim(); }
  int64_t z_stride(const GatedDeltaShape& s) const { return in_stride ? in_stride : s.nv * s.dv; }
  int64_t ab_stride(const GatedDeltaShape& s) const { return in_stride ? in_stride : s.nv; }

  // A `--state-dtype fp16` build keeps both states in IEEE half, which halves
  // the recurrent state's DRAM traffic (the largest read of a decode step
  // after the weights). Then these four replace the fp32 ones above (the
  // present may alias the past); the arithmetic stays fp32: each head's state
  // is widened into a scratch in cache, run, and rounded back once per call.
  const uint16_t* conv_past_f16 = nullptr;   // or null (zeros)
  uint16_t* conv_present_f16 = nullptr;
  const uint16_t* state_past_f16 = nullptr;  // or null (zeros)
  uint16_t* state_present_f16 = nullptr;
  bool f16_states() const { return state_present_f16 != nullptr; }
};

struct GatedDeltaParams {
  float scale = 0;    // on q; 0 means 1/sqrt(dk)
  float epsilon = 1e-6f;  // GatedRMSNorm's
};

// Requires nv % nk == 0, dk and dv in [1, kMaxDeltaHeadDim], K >= 1. `level`
// picks the recurrence's instruction set (tests try each; capped at what the
// CPU has).
void gated_delta_net(const GatedDeltaShape& s, const GatedDeltaParams& p, const GatedDeltaTensors& t,
                     const Parallel& parallel, KernelLevel level = default_level());

// The parts compiled once per instruction set (gated_delta_net_impl.h), for
// gated_delta_net() only, through kGatedDeltaFamily.
struct GatedDeltaHeadArgs {
  GatedDeltaShape s;
  float scale = 0, epsilon = 0;
  const float* xc = nullptr;      // [B, S, C] conv output (after SiLU)
  const float* silu_z = nullptr;  // [B, S, nv*dv]
  const float* a = nullptr;
  const float* b = nullptr;
  int64_t ab_stride = 0;  // floats between tokens of a and of b
  const float* dt_bias = nullptr;
  const float* neg_exp_a = nullptr;
  const float* norm_w = nullptr;
  float* state = nullptr;         // [B, nv, dk, dv], updated in place
  uint16_t* state_f16 = nullptr;  // or this, in IEEE half (then state is null)
  float* out = nullptr;
};
// The per-ISA table (dispatch.h).
struct GatedDeltaKernels {
  KernelLevel isa;
  // Conv + SiLU of channels [c0, c1) into xc [B, S, C], and their new conv state.
  void (*conv)(const GatedDeltaShape& s, const GatedDeltaTensors& t, int64_t c0, int64_t c1, float* xc);
  void (*silu)(float* v, int64_t n);  // in place
  // The recurrence and GatedRMSNorm of value heads [h0, h1) of one batch row, all tokens.
  void (*heads)(const GatedDeltaHeadArgs& args, int64_t row, int64_t h0, int64_t h1);
  // IEEE half <-> fp32 (round to nearest even), for fp16 states.
  void (*widen)(const uint16_t* src, float* dst, int64_t n);
  void (*narrow)(const float* src, uint16_t* dst, int64_t n);
};
extern const GatedDeltaKernels kGatedDeltaScalar;  // gated_delta_net.cpp (baseline x86-64)
extern const GatedDeltaKernels kGatedDeltaAvx2;    // gated_delta_net_avx2.cpp
extern const GatedDeltaKernels kGatedDeltaAvx512;  // gated_delta_net_avx512.cpp
extern const KernelFamily<GatedDeltaKernels> kGatedDeltaFamily;  // AMX: the AVX-512 table

}  // namespace deltagen::kernels
