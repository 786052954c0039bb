// The elementwise math the kernels share: a branch-free exp and SiLU /
// sigmoid built on it. One definition, so every kernel (SiLU in the conv,
// the DeltaNet and SwiGLU, softmax in attention, the attention output gate)
// rounds the same way.
//
// Two kinds of function live here, on purpose:
//  - exp_for_silu and silu_of are inline with internal linkage: per-ISA
//    files (compiled with -mavx2 / -mavx512f, CMakeLists.txt) include them so
//    the compiler vectorizes their loops at that width. Each file keeps its
//    own copy instead of the linker picking one ISA's for all.
//  - silu_inplace and mul_sigmoid are defined once, in vector_math.cpp,
//    compiled for baseline x86-64 (SSE2 intrinsics). Inlined into an AVX2
//    file, GCC would fuse their multiplies and adds into FMAs and change the
//    bits that baseline callers (causal conv, SwiGLU at scalar level, the
//    attention gate) have always produced.
#pragma once
#include <cstdint>
#include <cstring>

namespace deltagen::kernels {
namespace {

// exp(x) for the SiLU, inline and branch-free so the channel loops vectorize
// (std::exp is a library call per element, which made a 6144-channel decode
// step cost ~140 µs). Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, and a
// degree-6 Taylor polynomial for e^r (truncation < 2e-8 relative); 2^n is put
// into the exponent bits. Inputs are clamped to [-87, 88]: beyond, SiLU is
// 0 or x to float precision anyway.
inline float exp_for_silu(float x) {
  x = x > 88.0f ? 88.0f : x;  // ternaries, not std::min/max: they if-convert
  x = x < -87.0f ? -87.0f : x;
  // Round to nearest by adding and subtracting 1.5 * 2^23 (a library call
  // such as roundevenf would stop the vectorizer on baseline x86-64).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// x * sigmoid(x), as x / (1 + e^-x): for loops the compiler vectorizes.
inline float silu_of(float x) { return x / (1.0f + exp_for_silu(-x)); }

}  // namespace

// v <- v * sigmoid(v), in place (SSE2, the polynomial exp above; relative error ~1e-7).
void silu_inplace(float* v, int64_t n);
// v <- v * sigmoid(g) (g may be v), the same arithmetic.
void mul_sigmoid(float* v, const float* g, int64_t n);

}  // namespace deltagen::kernels
