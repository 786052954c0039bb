#include "kernels/gated_delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/causal_conv.h"
#include "kernels/cpu_features.h"
#include "kernels/gated_delta_net_impl.h"

namespace deltagen::kernels {

void gated_delta_head_portable(const GatedDeltaHeadArgs& args, int64_t row, int64_t head) {
  gated_delta_head(args, row, head);
}

namespace {

using HeadFn = void (*)(const GatedDeltaHeadArgs&, int64_t, int64_t);

HeadFn head_function(KernelLevel wanted) {
  const KernelLevel level = std::min(wanted, supported_level());
  if (level >= KernelLevel::Avx512) return &gated_delta_head_avx512;
  if (level >= KernelLevel::Avx2) return &gated_delta_head_avx2;
  return &gated_delta_head_portable;
}

// Conv + SiLU for channels [c0, c1) of every token, channels last, then the
// new conv state of those channels. The state is read for all tokens before
// it is overwritten, so present may alias past.
void conv_range(const GatedDeltaShape& s, const GatedDeltaTensors& t, int64_t c0, int64_t c1, float* xc) {
  const int64_t c = s.conv_dim(), kk = s.conv_kernel, st = kk - 1, n = c1 - c0;
  for (int64_t row = 0; row < s.batch; ++row) {
    const float* x = t.x + row * s.seq * c;
    const float* past = t.conv_past ? t.conv_past + row * c * st : nullptr;
    // xp(u, ch): the conv's input stream, u < 0 reaching back into the state.
    auto past_at = [&](int64_t u, int64_t ch) { return past ? past[ch * st + (st + u)] : 0.0f; };
    for (int64_t tok = 0; tok < s.seq; ++tok) {
      float* y = xc + (row * s.seq + tok) * c;
      for (int64_t ch = c0; ch < c1; ++ch) y[ch] = 0;
      for (int64_t j = 0; j < kk; ++j) {
        const int64_t u = tok + j - st;  // stream position tap j reads
        const float* w = t.conv_w_t + j * c;
        if (u >= 0) {
          const float* xu = x + u * c;
          for (int64_t ch = c0; ch < c1; ++ch) y[ch] += w[ch] * xu[ch];
        } else {
          for (int64_t ch = c0; ch < c1; ++ch) y[ch] += w[ch] * past_at(u, ch);
        }
      }
      silu_inplace(y + c0, n);
    }
    // present = the last K-1 values of the stream. Walking i upwards reads
    // state index seq + i >= i only, so updating in place is safe.
    float* present = t.conv_present + row * c * st;
    for (int64_t ch = c0; ch < c1; ++ch)
      for (int64_t i = 0; i < st; ++i) {
        const int64_t u = s.seq + i - st;
        present[ch * st + i] = u >= 0 ? x[u * c + ch] : past_at(u, ch);
      }
  }
}

}  // namespace

void gated_delta_net(const GatedDeltaShape& s, const GatedDeltaParams& p, const GatedDeltaTensors& t,
                     const Parallel& parallel, KernelLevel level) {
  const int64_t c = s.conv_dim(), tokens = s.batch * s.seq, zdim = s.nv * s.dv;
  std::vector<float> xc(size_t(tokens * c)), silu_z(t.z, t.z + tokens * zdim);

  // 1. Conv + SiLU and silu(z), in channel slices of ~32K multiply-adds.
  const int64_t per_task = std::max<int64_t>(256, ((int64_t(1) << 15) / std::max<int64_t>(1, tokens * s.conv_kernel) + 15) / 16 * 16);
  const int64_t conv_tasks = (c + per_task - 1) / per_task;
  const int64_t z_per_task = std::max<int64_t>(4096, per_task * s.conv_kernel);
  const int64_t z_tasks = (tokens * zdim + z_per_task - 1) / z_per_task;
  parallel.run(size_t(conv_tasks + z_tasks), [&](size_t task) {
    const int64_t i = int64_t(task);
    if (i < conv_tasks) {
      conv_range(s, t, i * per_task, std::min(c, (i + 1) * per_task), xc.data());
    } else {
      const int64_t z0 = (i - conv_tasks) * z_per_task;
      silu_inplace(silu_z.data() + z0, std::min(z_per_task, tokens * zdim - z0));
    }
  });

  // 2. The recurrence, one task per (batch row, value head); the state is
  // updated in place in present (copied from past first unless they alias).
  GatedDeltaHeadArgs args;
  args.s = s;
  args.scale = p.scale != 0 ? p.scale : float(1.0 / std::sqrt(double(s.dk)));
  args.epsilon = p.epsilon;
  args.xc = xc.data();
  args.silu_z = silu_z.data();
  args.a = t.a;
  args.b = t.b;
  args.dt_bias = t.dt_bias;
  args.neg_exp_a = t.neg_exp_a;
  args.norm_w = t.norm_w;
  args.state = t.state_present;
  args.out = t.out;
  const HeadFn head = head_function(level);
  const int64_t head_size = s.dk * s.dv;
  parallel.run(size_t(s.batch * s.nv), [&](size_t task) {
    const int64_t row = int64_t(task) / s.nv, h = int64_t(task) % s.nv;
    float* state = t.state_present + (row * s.nv + h) * head_size;
    if (!t.state_past)
      std::memset(state, 0, size_t(head_size) * sizeof(float));
    else if (t.state_past != t.state_present)
      std::memcpy(state, t.state_past + (row * s.nv + h) * head_size, size_t(head_size) * sizeof(float));
    head(args, row, h);
  });
}

}  // namespace deltagen::kernels
