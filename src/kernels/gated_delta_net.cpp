#include "kernels/gated_delta_net.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/gated_delta_net_impl.h"

namespace deltagen::kernels {

const GatedDeltaKernels kGatedDeltaScalar{KernelLevel::Scalar, conv_silu_range, silu_loop, heads_with_loops,
                                          widen_f16, narrow_f16};
const KernelFamily<GatedDeltaKernels> kGatedDeltaFamily{
    "gated_delta_net", {&kGatedDeltaScalar, &kGatedDeltaAvx2, &kGatedDeltaAvx512, &kGatedDeltaAvx512}};

namespace {

// Scratch for one call, written before it is read (no zero-fill: a prompt's
// is tens of MB). A decode step's few KB come from a per-thread buffer kept
// across calls: fresh heap blocks every step were returned to the system and
// faulted back in, ~5 us of a ~75 us decode call.
class Scratch {
 public:
  float* get(int64_t floats, bool reuse) {
    if (!reuse) {
      owned_ = std::make_unique_for_overwrite<float[]>(size_t(floats));
      return owned_.get();
    }
    if (kept_.size() < size_t(floats)) kept_.resize(size_t(floats));
    return kept_.data();
  }

 private:
  std::unique_ptr<float[]> owned_;
  std::vector<float> kept_;
};

// The state copied from past to present (zeros without a past) unless they
// alias, for `elements` states of type T starting at `offset`.
template <typename T>
void start_present(const T* past, T* present, int64_t offset, int64_t elements) {
  if (!past)
    std::memset(present + offset, 0, size_t(elements) * sizeof(T));
  else if (past != present)
    std::memcpy(present + offset, past + offset, size_t(elements) * sizeof(T));
}

}  // namespace

void gated_delta_net(const GatedDeltaShape& s, const GatedDeltaParams& p, const GatedDeltaTensors& t,
                     const Parallel& parallel, KernelLevel level) {
  const int64_t c = s.conv_dim(), tokens = s.batch * s.seq, zdim = s.nv * s.dv;
  const int64_t conv_floats = s.batch * c * (s.conv_kernel - 1), state_floats = s.batch * s.nv * s.dk * s.dv;
  const bool f16 = t.f16_states();
  if (tokens == 0) {  // no tokens: the states stay as they were
    if (s.batch == 0) return;
    if (f16) {
      if (t.conv_past_f16) start_present(t.conv_past_f16, t.conv_present_f16, 0, conv_floats);
      if (t.state_past_f16) start_present(t.state_past_f16, t.state_present_f16, 0, state_floats);
    } else {
      if (t.conv_past) start_present(t.conv_past, t.conv_present, 0, conv_floats);
      if (t.state_past) start_present(t.state_past, t.state_present, 0, state_floats);
    }
    return;
  }
  const GatedDeltaKernels& k = kGatedDeltaFamily.at(level);
  // fp16 states: the conv state (K-1 values per channel, tens of KiB) runs
  // widened in place in a scratch copy; the recurrent state head by head.
  GatedDeltaTensors tw = t;
  const bool decode = tokens <= 8;
  thread_local Scratch kept_conv, kept_xc, kept_z;
  Scratch call_conv, call_xc, call_z;
  float* conv_widened = nullptr;
  if (f16) {
    conv_widened = (decode ? kept_conv : call_conv).get(conv_floats, decode);
    if (t.conv_past_f16)
      k.widen(t.conv_past_f16, conv_widened, conv_floats);
    else
      std::fill_n(conv_widened, conv_floats, 0.0f);
    tw.conv_past = tw.conv_present = conv_widened;
  }
  float* const xc = (decode ? kept_xc : call_xc).get(tokens * c, decode);
  float* const silu_z = (decode ? kept_z : call_z).get(tokens * zdim, decode);
  const int64_t zs = t.z_stride(s);
  if (zs == zdim)
    std::memcpy(silu_z, t.z, size_t(tokens * zdim) * sizeof(float));
  else
    for (int64_t token = 0; token < tokens; ++token)
      std::memcpy(silu_z + token * zdim, t.z + token * zs, size_t(zdim) * sizeof(float));

  // 1. Conv + SiLU and silu(z), in slices of ~8K multiply-adds (a decode step
  // of Qwen3.5's 6144 channels in three, plus one for z's 2048 SiLUs).
  const int64_t per_channel = std::max<int64_t>(1, tokens * s.conv_kernel);
  const int64_t per_task = std::max<int64_t>(256, ((int64_t(1) << 13) / per_channel + 15) / 16 * 16);
  const int64_t conv_tasks = (c + per_task - 1) / per_task;
  const int64_t z_per_task = std::max<int64_t>(4096, per_task * s.conv_kernel);
  const int64_t z_tasks = (tokens * zdim + z_per_task - 1) / z_per_task;
  parallel.run(size_t(conv_tasks + z_tasks), [&](size_t task) {
    const int64_t i = int64_t(task);
    if (i < conv_tasks) {
      k.conv(s, tw, i * per_task, std::min(c, (i + 1) * per_task), xc);
    } else {
      const int64_t z0 = (i - conv_tasks) * z_per_task;
      k.silu(silu_z + z0, std::min(z_per_task, tokens * zdim - z0));
    }
  });
  if (f16) k.narrow(conv_widened, t.conv_present_f16, conv_floats);

  // 2. The recurrence, one task per (batch row, run of 4 value heads): a
  // decode step of 16 heads in four tasks, so each thread mostly has a next
  // head whose state it can prefetch. The state is updated in place in
  // present (copied from past first unless they alias).
  GatedDeltaHeadArgs args;
  args.s = s;
  args.scale = p.scale != 0 ? p.scale : float(1.0 / std::sqrt(double(s.dk)));
  args.epsilon = p.epsilon;
  args.xc = xc;
  args.silu_z = silu_z;
  args.a = t.a;
  args.b = t.b;
  args.ab_stride = t.ab_stride(s);
  args.dt_bias = t.dt_bias;
  args.neg_exp_a = t.neg_exp_a;
  args.norm_w = t.norm_w;
  args.state = f16 ? nullptr : t.state_present;
  args.state_f16 = f16 ? t.state_present_f16 : nullptr;
  args.out = t.out;
  const int64_t head_size = s.dk * s.dv;
  const int64_t run = 4, runs = (s.nv + run - 1) / run;
  parallel.run(size_t(s.batch * runs), [&](size_t task) {
    const int64_t row = int64_t(task) / runs, h0 = int64_t(task) % runs * run, h1 = std::min(s.nv, h0 + run);
    const int64_t offset = (row * s.nv + h0) * head_size, elements = (h1 - h0) * head_size;
    if (f16)
      start_present(t.state_past_f16, t.state_present_f16, offset, elements);
    else
      start_present(t.state_past, t.state_present, offset, elements);
    k.heads(args, row, h0, h1);
  });
}

}  // namespace deltagen::kernels
