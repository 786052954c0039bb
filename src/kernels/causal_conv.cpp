#include "kernels/causal_conv.h"

#include <algorithm>
#include <cmath>

namespace deltagen::kernels {
namespace {

// Channels per task: one decode step's work in one or two tasks, prefill in
// slices of ~64K multiply-adds.
int64_t channels_per_task(const CausalConvShape& s) {
  const int64_t per_channel = std::max<int64_t>(1, s.length * s.kernel);
  return std::max<int64_t>(256, (int64_t(1) << 16) / per_channel);
}

inline float activate(float v, bool silu) { return silu ? v / (1.0f + std::exp(-v)) : v; }

void channel_range(const CausalConvShape& s, const float* x, const float* w, const float* bias, const float* past,
                   bool silu, float* y, float* present, int64_t b, int64_t c0, int64_t c1) {
  const int64_t k = s.kernel, l = s.length, state = k - 1;
  for (int64_t c = c0; c < c1; ++c) {
    const int64_t row = b * s.channels + c;
    const float* wc = w + c * k;
    const float bc = bias ? bias[c] : 0.0f;
    const float* xc = x + row * l;
    const float* pc = past ? past + row * state : nullptr;
    float* yc = y + row * l;
    // xp[i] = the history (i < state) or the input; no copy of either.
    auto xp = [&](int64_t i) { return i < state ? (pc ? pc[i] : 0.0f) : xc[i - state]; };
    const int64_t head = std::min(l, state);  // outputs that still read the history
    for (int64_t t = 0; t < head; ++t) {
      float acc = bc;
      for (int64_t j = 0; j < k; ++j) acc += wc[j] * xp(t + j);
      yc[t] = activate(acc, silu);
    }
    for (int64_t t = head; t < l; ++t) {
      const float* xt = xc + (t - state);
      float acc = bc;
      for (int64_t j = 0; j < k; ++j) acc += wc[j] * xt[j];
      yc[t] = activate(acc, silu);
    }
    float* out_state = present + row * state;
    for (int64_t i = 0; i < state; ++i) out_state[i] = xp(l + i);
  }
}

}  // namespace

void causal_conv1d(const CausalConvShape& s, const float* x, const float* w, const float* bias, const float* past,
                   bool silu, float* y, float* present, const Parallel& parallel) {
  if (s.batch <= 0 || s.channels <= 0 || s.kernel <= 0) return;
  const int64_t per_task = channels_per_task(s);
  const int64_t tasks_per_row = (s.channels + per_task - 1) / per_task;
  parallel.run(size_t(s.batch * tasks_per_row), [&](size_t i) {
    const int64_t b = int64_t(i) / tasks_per_row;
    const int64_t c0 = (int64_t(i) % tasks_per_row) * per_task;
    channel_range(s, x, w, bias, past, silu, y, present, b, c0, std::min(s.channels, c0 + per_task));
  });
}

}  // namespace deltagen::kernels
