// A branch-free exp for SiLU/sigmoid loops the compiler can vectorize.
// Included by files compiled with different instruction sets
// (causal_conv.cpp, gated_delta_net*.cpp): internal linkage, so each keeps
// its own copy instead of the linker picking one ISA's for all.
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

}  // namespace
}  // namespace deltagen::kernels
