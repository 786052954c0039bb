#include "kernels/causal_conv.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/vector_math.h"

namespace deltagen::kernels {
namespace {

// Channels per task: a decode step of a 6144-channel layer in two tasks (one
// per core here: 62 vs 73 µs per node inside ORT), prefill in slices of ~8K
// multiply-adds.
int64_t channels_per_task(const CausalConvShape& s) {
  const int64_t per_channel = std::max<int64_t>(1, s.length * s.kernel);
  return std::max<int64_t>(1024, (int64_t(1) << 13) / per_channel);
}


// One token (decode): per channel, K-1 state values, the new input, the weights.
void decode_range(const CausalConvShape& s, const float* x, const float* w, const float* bias, const float* past,
                  bool silu, float* y, float* present, int64_t b, int64_t c0, int64_t c1) {
  const int64_t k = s.kernel, st = k - 1, row0 = b * s.channels;
  for (int64_t c = c0; c < c1; ++c) {
    const int64_t row = row0 + c;
    const float* wc = w + c * k;
    const float* pc = past ? past + row * st : nullptr;
    const float xc = x[row];
    float acc = (bias ? bias[c] : 0.0f) + wc[st] * xc;
    if (pc)
      for (int64_t j = 0; j < st; ++j) acc += wc[j] * pc[j];
    y[row] = acc;
    float* out_state = present + row * st;
    for (int64_t j = 0; j + 1 < st; ++j) out_state[j] = pc ? pc[j + 1] : 0.0f;
    if (st > 0) out_state[st - 1] = xc;
  }
  if (silu) silu_inplace(y + row0 + c0, c1 - c0);  // one token: the channels' outputs are contiguous
}

// Any length: per channel, the outputs that still read the state, then the rest.
void prefill_range(const CausalConvShape& s, const float* x, const float* w, const float* bias, const float* past,
                   bool silu, float* y, float* present, int64_t b, int64_t c0, int64_t c1) {
  const int64_t k = s.kernel, l = s.length, st = k - 1;
  for (int64_t c = c0; c < c1; ++c) {
    const int64_t row = b * s.channels + c;
    const float* wc = w + c * k;
    const float bc = bias ? bias[c] : 0.0f;
    const float* xc = x + row * l;
    const float* pc = past ? past + row * st : nullptr;
    float* yc = y + row * l;
    // xp(i): the history (i < st) or the input; no copy of either.
    auto xp = [&](int64_t i) { return i < st ? (pc ? pc[i] : 0.0f) : xc[i - st]; };
    const int64_t head = std::min(l, st);
    for (int64_t t = 0; t < head; ++t) {
      float acc = bc;
      for (int64_t j = 0; j < k; ++j) acc += wc[j] * xp(t + j);
      yc[t] = acc;
    }
    for (int64_t t = head; t < l; ++t) {
      const float* xt = xc + (t - st);
      float acc = bc;
      for (int64_t j = 0; j < k; ++j) acc += wc[j] * xt[j];
      yc[t] = acc;
    }
    if (silu) silu_inplace(yc, l);
    float* out_state = present + row * st;
    for (int64_t i = 0; i < st; ++i) out_state[i] = xp(l + i);
  }
}

}  // namespace

const CausalConvKernels kCausalConvScalar{KernelLevel::Scalar, decode_range, prefill_range};
const KernelFamily<CausalConvKernels> kCausalConvFamily{
    "causal_conv", {&kCausalConvScalar, &kCausalConvScalar, &kCausalConvScalar, &kCausalConvScalar}};

void causal_conv1d(const CausalConvShape& s, const float* x, const float* w, const float* bias, const float* past,
                   bool silu, float* y, float* present, const Parallel& parallel, KernelLevel level) {
  if (s.batch <= 0 || s.channels <= 0 || s.kernel <= 0) return;
  const int64_t per_task = channels_per_task(s);
  const int64_t tasks_per_row = (s.channels + per_task - 1) / per_task;
  const CausalConvKernels& kernels = kCausalConvFamily.at(level);
  const auto body = s.length == 1 ? kernels.decode : kernels.prefill;
  parallel.run(size_t(s.batch * tasks_per_row), [&](size_t i) {
    const int64_t b = int64_t(i) / tasks_per_row;
    const int64_t c0 = (int64_t(i) % tasks_per_row) * per_task;
    body(s, x, w, bias, past, silu, y, present, b, c0, std::min(s.channels, c0 + per_task));
  });
}

}  // namespace deltagen::kernels
