// Depthwise causal 1-D convolution with carried state, the token mixer in
// front of Gated DeltaNet (com.microsoft.CausalConvWithState, channels first):
//
//   xp[b,c,:] = concat(past[b,c,0..K-2], x[b,c,0..L-1])            // K-1+L values
//   y[b,c,t]  = act(bias[c] + sum_{j<K} w[c,j] * xp[b,c,t+j])       // t < L
//   present[b,c,:] = xp[b,c,L..L+K-2]                               // the last K-1
//
// act is SiLU (y * sigmoid(y)) or the identity. One token per step (L = 1) is
// the decode case: a few multiply-adds per channel, so the point is to do
// nothing else (no allocation, no transposed copies).
#pragma once
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace deltagen::kernels {

struct CausalConvShape {
  int64_t batch = 1, channels = 0, length = 0, kernel = 0;
};

// x, y: [B, C, L]; w: [C, K]; bias: [C] or null; past: [B, C, K-1] or null
// (zeros); present: [B, C, K-1]. y may not alias x; present may not alias past.
void causal_conv1d(const CausalConvShape& s, const float* x, const float* w, const float* bias, const float* past,
                   bool silu, float* y, float* present, const Parallel& parallel, KernelLevel level = default_level());

// The per-ISA table (dispatch.h): channels [c0, c1) of batch row b, one
// token (decode) or any length (prefill).
struct CausalConvKernels {
  KernelLevel isa;
  using Range = void (*)(const CausalConvShape& s, const float* x, const float* w, const float* bias,
                         const float* past, bool silu, float* y, float* present, int64_t b, int64_t c0, int64_t c1);
  Range decode;
  Range prefill;
};
// causal_conv.cpp, baseline x86-64 with the SSE2 SiLU. It serves every level:
// a decode step is a few multiply-adds per channel, bound by memory, and a
// build with FMA would change the bits the conv op has always produced.
extern const CausalConvKernels kCausalConvScalar;
extern const KernelFamily<CausalConvKernels> kCausalConvFamily;

}  // namespace deltagen::kernels
