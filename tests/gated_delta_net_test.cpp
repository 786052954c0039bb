// deltagen.GatedDeltaNet: the kernel (every instruction set this CPU has)
// against the definition in double, in place and not, serial and threaded;
// and the load-time fusion on the golden model: the default form fuses every
// linear-attention layer, other forms are left alone. (The golden runtime
// tests run through the fused node, since fast kernels are the default.)
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include <onnx/onnx_pb.h>

#include "checkpoint/checkpoint.h"
#include "kernels/gated_delta_net.h"
#include "kernels/thread_pool.h"
#include "models/build.h"
#include "reference/qwen35_ops.h"
#include "rewrite/model_rewrite.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "test_util.h"
#include "util/half.h"
#include "kernel_levels.h"

namespace deltagen {
namespace {

using kernels::GatedDeltaShape;
using test::TempDir;
namespace fs = std::filesystem;

std::vector<float> random_values(size_t n, std::mt19937& rng, float lo = -1.5f, float hi = 1.5f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct Inputs {
  std::vector<float> x, conv_w, conv_past, z, a, b, dt_bias, neg_exp_a, state_past, norm_w;
};

struct Outputs {
  std::vector<float> out, conv_present, state_present;
};

Inputs random_inputs(const GatedDeltaShape& s, std::mt19937& rng) {
  const size_t c = size_t(s.conv_dim()), tokens = size_t(s.batch * s.seq);
  Inputs in;
  in.x = random_values(tokens * c, rng);
  in.conv_w = random_values(c * size_t(s.conv_kernel), rng, -0.8f, 0.8f);
  in.conv_past = random_values(size_t(s.batch) * c * size_t(s.conv_kernel - 1), rng);
  in.z = random_values(tokens * size_t(s.nv * s.dv), rng);
  in.a = random_values(tokens * size_t(s.nv), rng, -3.0f, 3.0f);
  in.b = random_values(tokens * size_t(s.nv), rng, -3.0f, 3.0f);
  in.dt_bias = random_values(size_t(s.nv), rng);
  in.neg_exp_a = random_values(size_t(s.nv), rng, -4.0f, -0.05f);
  in.state_past = random_values(size_t(s.batch * s.nv * s.dk * s.dv), rng, -0.5f, 0.5f);
  in.norm_w = random_values(size_t(s.dv), rng, 0.5f, 1.5f);
  return in;
}

// The definition (gated_delta_net.h) in double, from the reference model's
// pieces (reference/qwen35_ops.h). Each channel's conv window holds K inputs,
// the K-1 carried ones last; LpNormalization has no eps.
Outputs reference(const GatedDeltaShape& s, double scale, double eps, const Inputs& in) {
  const int64_t c = s.conv_dim(), K = s.conv_kernel, st = K - 1, tokens = s.batch * s.seq;
  const int64_t dk = s.dk, dv = s.dv;
  std::vector<double> y(size_t(tokens * c));  // the conv's outputs after SiLU: q, k, v of every token
  Outputs r;
  r.conv_present.resize(in.conv_past.size());
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t ch = 0; ch < c; ++ch) {
      const std::vector<double> w(in.conv_w.begin() + ch * K, in.conv_w.begin() + (ch + 1) * K);
      std::vector<double> window(size_t(K), 0.0);
      for (int64_t i = 0; i < st; ++i) window[size_t(1 + i)] = in.conv_past[size_t((b * c + ch) * st + i)];
      for (int64_t t = 0; t < s.seq; ++t) {
        const size_t at = size_t((b * s.seq + t) * c + ch);
        y[at] = ref::silu(ref::causal_conv_step(window.data(), w.data(), K, in.x[at]));
      }
      for (int64_t i = 0; i < st; ++i) r.conv_present[size_t((b * c + ch) * st + i)] = float(window[size_t(1 + i)]);
    }
  r.out.resize(size_t(tokens * s.nv * dv));
  r.state_present.resize(in.state_past.size());
  const std::vector<double> norm_w(in.norm_w.begin(), in.norm_w.end());
  std::vector<double> q(static_cast<size_t>(dk)), k(static_cast<size_t>(dk)), o(static_cast<size_t>(dv)), z(static_cast<size_t>(dv));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.nv; ++h) {
      const int64_t kh = h / (s.nv / s.nk);
      const size_t base = size_t((b * s.nv + h) * dk * dv);
      std::vector<double> S(in.state_past.begin() + long(base), in.state_past.begin() + long(base + size_t(dk * dv)));
      for (int64_t t = 0; t < s.seq; ++t) {
        const int64_t tok = b * s.seq + t;
        const double* row = y.data() + tok * c;
        q.assign(row + kh * dk, row + kh * dk + dk);
        k.assign(row + s.nk * dk + kh * dk, row + s.nk * dk + kh * dk + dk);
        ref::l2_normalize(q.data(), dk, 0.0);
        ref::l2_normalize(k.data(), dk, 0.0);
        for (double& e : q) e *= scale;
        const size_t gate = size_t(tok * s.nv + h), zo = size_t(tok * s.nv * dv + h * dv);
        const double decay = ref::delta_decay(in.neg_exp_a[size_t(h)], in.a[gate], in.dt_bias[size_t(h)]);
        ref::delta_rule_step(S.data(), q.data(), k.data(), row + 2 * s.nk * dk + h * dv, ref::sigmoid(in.b[gate]),
                             decay, dk, dv, o.data());
        z.assign(in.z.begin() + long(zo), in.z.begin() + long(zo + size_t(dv)));
        ref::gated_rms_norm(o.data(), z.data(), norm_w.data(), dv, eps);
        for (int64_t j = 0; j < dv; ++j) r.out[zo + size_t(j)] = float(o[size_t(j)]);
      }
      for (size_t i = 0; i < S.size(); ++i) r.state_present[base + i] = float(S[i]);
    }
  return r;
}

// packed: x, z, b, a handed over as column ranges of one [B, S, C + 2 nv + nv dv]
// tensor (the in_proj output, as the fused node reads it).
Outputs run_kernel(const GatedDeltaShape& s, float scale, float eps, const Inputs& in, bool in_place,
                   const kernels::Parallel& parallel, kernels::KernelLevel level, bool packed = false) {
  std::vector<float> w_t(in.conv_w.size());
  for (int64_t ch = 0; ch < s.conv_dim(); ++ch)
    for (int64_t j = 0; j < s.conv_kernel; ++j)
      w_t[size_t(j * s.conv_dim() + ch)] = in.conv_w[size_t(ch * s.conv_kernel + j)];
  Outputs r;
  r.out.resize(in.z.size());
  r.conv_present = in_place ? in.conv_past : std::vector<float>(in.conv_past.size());
  r.state_present = in_place ? in.state_past : std::vector<float>(in.state_past.size());
  kernels::GatedDeltaTensors t;
  t.x = in.x.data();
  t.conv_w_t = w_t.data();
  t.conv_past = in_place ? r.conv_present.data() : in.conv_past.data();
  t.conv_present = r.conv_present.data();
  t.z = in.z.data();
  t.a = in.a.data();
  t.b = in.b.data();
  t.dt_bias = in.dt_bias.data();
  t.neg_exp_a = in.neg_exp_a.data();
  t.state_past = in_place ? r.state_present.data() : in.state_past.data();
  t.state_present = r.state_present.data();
  t.norm_w = in.norm_w.data();
  t.out = r.out.data();
  std::vector<float> in_proj;
  if (packed) {
    const int64_t c = s.conv_dim(), zw = s.nv * s.dv, width = c + zw + 2 * s.nv;
    in_proj.resize(static_cast<size_t>(s.batch * s.seq * width));
    for (int64_t token = 0; token < s.batch * s.seq; ++token) {
      float* row = in_proj.data() + token * width;
      std::copy_n(in.x.data() + token * c, c, row);
      std::copy_n(in.z.data() + token * zw, zw, row + c);
      std::copy_n(in.b.data() + token * s.nv, s.nv, row + c + zw);
      std::copy_n(in.a.data() + token * s.nv, s.nv, row + c + zw + s.nv);
    }
    t.in_stride = width;
    t.x = in_proj.data();
    t.z = t.x + c;
    t.b = t.z + zw;
    t.a = t.b + s.nv;
  }
  kernels::gated_delta_net(s, {scale, eps}, t, parallel, level);
  return r;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::fabs(want[i]))) << what << " [" << i << "]";
}

TEST(GatedDeltaNet, KernelMatchesTheDefinitionAtEveryLevel) {
  const test::LevelsUnderTest levels{kernels::KernelLevel::Scalar, kernels::KernelLevel::Avx2, kernels::KernelLevel::Avx512};
  std::mt19937 rng(11);
  kernels::ThreadPool pool(2);
  const kernels::SerialParallel serial;
  // {batch, seq, nk, nv, dk, dv, K}: Qwen3.5's 16/16 heads scaled down, the
  // 4B/9B inverse-GQA shape (more value heads), odd dims, K = 1.
  const GatedDeltaShape shapes[] = {
      {2, 1, 2, 2, 32, 32, 4}, {2, 7, 2, 4, 16, 16, 4}, {1, 40, 1, 3, 5, 7, 2}, {2, 3, 2, 2, 24, 9, 1},
      // decode with K = 4 (the AVX-512 conv) on 24 channels: one vector of 16 and a tail of 8;
      // and Qwen3.5's head dims (the register-blocked recurrence, dv = 128), 5 heads: runs of 4 and 1.
      {2, 1, 1, 2, 5, 7, 4}, {1, 2, 5, 5, 128, 128, 4}};
  for (const auto& s : shapes) {
    const Inputs in = random_inputs(s, rng);
    const float scale = float(1.0 / std::sqrt(double(s.dk)));
    const Outputs want = reference(s, scale, 1e-6, in);
    for (auto level : levels.runnable) {
      for (bool in_place : {false, true}) {
        const std::string what = std::string(kernels::level_name(level)) + (in_place ? " in place" : "") +
                                 " seq " + std::to_string(s.seq) + " dk " + std::to_string(s.dk);
        // scale 0 means 1/sqrt(dk), as in LinearAttention.
        const Outputs got = run_kernel(s, in_place ? 0.0f : scale, 1e-6f, in, in_place, in_place ? (const kernels::Parallel&)pool : serial, level);
        expect_close(got.out, want.out, 2e-4, what + " out");
        EXPECT_EQ(got.conv_present, want.conv_present) << what;
        expect_close(got.state_present, want.state_present, 2e-4, what + " state");
        // The in_proj output read in place of its four slices: the same bits.
        const Outputs packed = run_kernel(s, in_place ? 0.0f : scale, 1e-6f, in, in_place, serial, level, true);
        EXPECT_EQ(packed.out, got.out) << what << " packed";
        EXPECT_EQ(packed.conv_present, got.conv_present) << what << " packed";
        EXPECT_EQ(packed.state_present, got.state_present) << what << " packed";
      }
    }
  }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

TEST(GatedDeltaNet, ThreadsGiveBitIdenticalResults) {
  std::mt19937 rng(12);
  const GatedDeltaShape s{2, 33, 2, 4, 16, 16, 4};
  const Inputs in = random_inputs(s, rng);
  kernels::ThreadPool pool(2);
  const auto serial = run_kernel(s, 0, 1e-6f, in, false, kernels::SerialParallel(), kernels::default_level());
  const auto threaded = run_kernel(s, 0, 1e-6f, in, false, pool, kernels::default_level());
  EXPECT_EQ(serial.out, threaded.out);
  EXPECT_EQ(serial.state_present, threaded.state_present);
}

// A run of n tokens (a prompt, a speculative verify run) must give the bits
// of n one-token runs (decode steps): speculative output equals plain output
// token for token, and a prompt gives the same logits however it is split.
// Covers the AVX-512 multi-token recurrence (dv 16 and 128, runs across its
// 16-token blocks) and the loops' token-by-token one (odd dims); the conv's
// decode paths (K = 4 on AVX-512, any K in the loops) against its prompt path.
TEST(GatedDeltaNet, ATokenRunIsItsTokensOneByOne) {
  // {batch 1, seq, nk, nv, dk, dv, K}
  const GatedDeltaShape shapes[] = {{1, 4, 2, 2, 128, 128, 4}, {1, 37, 1, 2, 16, 16, 4}, {1, 5, 1, 2, 9, 7, 3},
                                    {1, 17, 2, 4, 32, 64, 1}, {1, 6, 3, 3, 16, 16, 4}};
  const test::LevelsUnderTest levels{kernels::KernelLevel::Scalar, kernels::KernelLevel::Avx2, kernels::KernelLevel::Avx512};
  kernels::ThreadPool pool(2);
  std::mt19937 rng(14);
  for (const auto& s : shapes) {
    const Inputs in = random_inputs(s, rng);
    const int64_t c = s.conv_dim(), zw = s.nv * s.dv;
    for (auto level : levels.runnable) {
      const std::string what = std::string(kernels::level_name(level)) + " seq " + std::to_string(s.seq) + " dv " +
                               std::to_string(s.dv);
      const Outputs whole = run_kernel(s, 0, 1e-6f, in, false, pool, level);
      GatedDeltaShape one = s;
      one.seq = 1;
      Inputs step = in;
      std::vector<float> out;
      for (int64_t t = 0; t < s.seq; ++t) {
        step.x.assign(in.x.begin() + t * c, in.x.begin() + (t + 1) * c);
        step.z.assign(in.z.begin() + t * zw, in.z.begin() + (t + 1) * zw);
        step.a.assign(in.a.begin() + t * s.nv, in.a.begin() + (t + 1) * s.nv);
        step.b.assign(in.b.begin() + t * s.nv, in.b.begin() + (t + 1) * s.nv);
        const Outputs got = run_kernel(one, 0, 1e-6f, step, false, pool, level);
        out.insert(out.end(), got.out.begin(), got.out.end());
        step.conv_past = got.conv_present;
        step.state_past = got.state_present;
      }
      EXPECT_EQ(whole.out, out) << what;
      EXPECT_EQ(whole.conv_present, step.conv_past) << what;
      EXPECT_EQ(whole.state_present, step.state_past) << what;
    }
  }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

// fp16 states (a --state-dtype fp16 build): the kernel must compute exactly
// what it computes on the widened states, rounding the new states once per
// call. Covers the AVX-512 direct path (one token, dv 128 and 16) and the
// widened scratch (prompts, odd dims), in place and not, at every level.
TEST(GatedDeltaNet, Fp16StatesAreTheFp32KernelRoundedOncePerCall) {
  const test::LevelsUnderTest levels{kernels::KernelLevel::Scalar, kernels::KernelLevel::Avx2, kernels::KernelLevel::Avx512};
  std::mt19937 rng(13);
  kernels::ThreadPool pool(2);
  const GatedDeltaShape shapes[] = {{2, 1, 2, 2, 128, 128, 4}, {1, 1, 2, 4, 16, 16, 4}, {2, 5, 2, 4, 16, 16, 4},
                                    {1, 1, 1, 3, 5, 7, 2}, {1, 3, 1, 2, 24, 9, 1}};
  auto round_trip = [](std::vector<float> v) {
    for (auto& x : v) x = f16_to_f32(f32_to_f16(x));
    return v;
  };
  for (const auto& s : shapes) {
    Inputs in = random_inputs(s, rng);
    in.conv_past = round_trip(in.conv_past);  // what an fp16 state holds
    in.state_past = round_trip(in.state_past);
    std::vector<float> w_t(in.conv_w.size());
    for (int64_t ch = 0; ch < s.conv_dim(); ++ch)
      for (int64_t j = 0; j < s.conv_kernel; ++j)
        w_t[size_t(j * s.conv_dim() + ch)] = in.conv_w[size_t(ch * s.conv_kernel + j)];
    auto to_f16 = [](const std::vector<float>& v) {
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_f16(v[i]);
      return h;
    };
    for (auto level : levels.runnable) {
      const Outputs want = run_kernel(s, 0.0f, 1e-6f, in, false, pool, level);
      for (bool in_place : {false, true}) {
        const std::string what = std::string(kernels::level_name(level)) + (in_place ? " in place" : "") +
                                 " seq " + std::to_string(s.seq) + " dv " + std::to_string(s.dv);
        std::vector<uint16_t> conv_past = to_f16(in.conv_past), state_past = to_f16(in.state_past);
        std::vector<uint16_t> conv_present = in_place ? conv_past : std::vector<uint16_t>(conv_past.size());
        std::vector<uint16_t> state_present = in_place ? state_past : std::vector<uint16_t>(state_past.size());
        std::vector<float> out(in.z.size());
        kernels::GatedDeltaTensors t;
        t.x = in.x.data();
        t.conv_w_t = w_t.data();
        t.z = in.z.data();
        t.a = in.a.data();
        t.b = in.b.data();
        t.dt_bias = in.dt_bias.data();
        t.neg_exp_a = in.neg_exp_a.data();
        t.norm_w = in.norm_w.data();
        t.out = out.data();
        t.conv_past_f16 = in_place ? conv_present.data() : conv_past.data();
        t.conv_present_f16 = conv_present.data();
        t.state_past_f16 = in_place ? state_present.data() : state_past.data();
        t.state_present_f16 = state_present.data();
        kernels::gated_delta_net(s, {0.0f, 1e-6f}, t, pool, level);
        EXPECT_EQ(out, want.out) << what;
        EXPECT_EQ(conv_present, to_f16(want.conv_present)) << what;
        EXPECT_EQ(state_present, to_f16(want.state_present)) << what;
      }
    }
  }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

rewrite::RewriteSummary rewrite_built_model(const BuildOptions& options, onnx::ModelProto* model_out = nullptr) {
  TempDir dir;
  {
    auto ckpt = Checkpoint::open(test::golden_checkpoint());
    build_model(*ckpt, options, dir / "model");
  }
  onnx::ModelProto model;
  std::ifstream in(dir / "model" / "model.onnx", std::ios::binary);
  EXPECT_TRUE(model.ParseFromIstream(&in));
  auto summary = rewrite::use_deltagen_kernels(model);
  if (model_out) *model_out = model;
  return summary;
}

TEST(GatedDeltaNet, GoldenModelFusesEveryLinearAttentionLayer) {
  onnx::ModelProto model;
  const auto summary = rewrite_built_model(BuildOptions{}, &model);
  EXPECT_EQ(summary.gated_delta_net, 3);  // tiny-a: 3 linear-attention layers
  EXPECT_EQ(summary.causal_conv, 0);      // their convs are inside the fused nodes
  int fused = 0;
  for (const auto& node : model.graph().node()) {
    EXPECT_NE(node.op_type(), "LinearAttention");
    EXPECT_NE(node.op_type(), "GatedRMSNorm");
    EXPECT_NE(node.op_type(), "LpNormalization");
    if (node.op_type() == "Split") EXPECT_EQ(node.name().find("linear_attn"), std::string::npos) << node.name();
    if (node.op_type() == "GatedDeltaNet") {
      ++fused;
      EXPECT_EQ(node.domain(), "deltagen");
      EXPECT_EQ(node.name().find("/model/layers."), 0u) << node.name();
      ASSERT_EQ(node.output_size(), 3);
      EXPECT_NE(node.output(2).find("recurrent_state"), std::string::npos) << node.output(2);
      // The in_proj Split went in too: input 0 is the projection's output, z/a/b absent.
      ASSERT_EQ(node.input_size(), 10);
      EXPECT_NE(node.input(0).find("in_proj"), std::string::npos) << node.input(0);
      EXPECT_TRUE(node.input(3).empty() && node.input(4).empty() && node.input(5).empty()) << node.name();
      bool widths = false;
      for (const auto& a : node.attribute()) widths |= a.name() == "in_proj_widths" && a.ints_size() == 4;
      EXPECT_TRUE(widths) << node.name();
    }
  }
  EXPECT_EQ(fused, 3);
}

// With 16-bit states the builder puts a Cast after each present state, right
// after the node that computes it, so before the chain's end: the rewrite must
// leave every node after the ones it reads from.
TEST(GatedDeltaNet, Fp16StatesFuseAndTheGraphStaysSorted) {
  BuildOptions fp16_state;
  fp16_state.state_dtype = FloatType::Fp16;
  onnx::ModelProto model;
  EXPECT_EQ(rewrite_built_model(fp16_state, &model).gated_delta_net, 3);
  // The state Casts are inside the fused nodes: they read and write the fp16 graph values.
  std::set<std::string> graph_inputs, graph_outputs;
  for (const auto& in : model.graph().input()) graph_inputs.insert(in.name());
  for (const auto& out : model.graph().output()) graph_outputs.insert(out.name());
  for (const auto& node : model.graph().node()) {
    if (node.op_type() == "Cast")
      EXPECT_EQ(node.input(0).find("past_key_values"), std::string::npos) << node.name() << " still widens a state";
    if (node.op_type() != "GatedDeltaNet") continue;
    EXPECT_TRUE(graph_inputs.count(node.input(2)) && graph_inputs.count(node.input(8))) << node.name();
    EXPECT_TRUE(graph_outputs.count(node.output(1)) && graph_outputs.count(node.output(2))) << node.name();
  }
  std::set<std::string> defined = {""};
  for (const auto& in : model.graph().input()) defined.insert(in.name());
  for (const auto& t : model.graph().initializer()) defined.insert(t.name());
  for (const auto& node : model.graph().node()) {
    for (const auto& in : node.input()) EXPECT_TRUE(defined.count(in)) << node.name() << " reads " << in << " early";
    for (const auto& out : node.output()) defined.insert(out);
  }
}

// model_rewrite_fuzz found a mutated tiny model in which two values had two
// producers each (not valid ONNX, but a file can say so): two LinearAttention
// nodes matched one chain, one fused node replaced the other, and the summary
// counted a node the graph did not have. Overlapping chains now fuse once.
TEST(GatedDeltaNet, FuzzFoundOverlappingChainsFuseOnce) {
  std::ifstream in(fs::path(DELTAGEN_SOURCE_DIR) / "tests/data/fuzz/model_rewrite_overlapping_chains.onnx",
                   std::ios::binary);
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromIstream(&in));
  const auto summary = rewrite::use_deltagen_kernels(model);
  int fused = 0;
  for (const auto& node : model.graph().node()) fused += node.op_type() == "GatedDeltaNet";
  EXPECT_EQ(fused, summary.gated_delta_net);
  EXPECT_GE(fused, 1);
}

// A LinearAttention node duplicated: its inputs now have two readers, so that
// layer stays on ORT's kernels and the count still matches the graph.
TEST(GatedDeltaNet, DuplicatedLayerIsNotFused) {
  TempDir dir;
  {
    auto ckpt = Checkpoint::open(test::golden_checkpoint());
    build_model(*ckpt, BuildOptions{}, dir / "model");
  }
  onnx::ModelProto model;
  std::ifstream in(dir / "model" / "model.onnx", std::ios::binary);
  ASSERT_TRUE(model.ParseFromIstream(&in));
  auto* nodes = model.mutable_graph()->mutable_node();
  for (int i = 0; i < nodes->size(); ++i)
    if ((*nodes)[i].op_type() == "LinearAttention") {
      onnx::NodeProto copy = (*nodes)[i];
      copy.set_name(copy.name() + "_copy");
      nodes->Add(std::move(copy));
      break;
    }
  const auto summary = rewrite::use_deltagen_kernels(model);
  int fused = 0;
  for (const auto& node : model.graph().node()) fused += node.op_type() == "GatedDeltaNet";
  EXPECT_EQ(fused, summary.gated_delta_net);
  EXPECT_EQ(fused, 2);
}

TEST(GatedDeltaNet, OtherFormsOfTheLayerAreLeftToOrt) {
  BuildOptions decomposed;
  decomposed.l2norm = L2Norm::Decomposed;
  EXPECT_EQ(rewrite_built_model(decomposed).gated_delta_net, 0);
  EXPECT_EQ(rewrite_built_model(decomposed).causal_conv, 3);
  BuildOptions plain_norm;
  plain_norm.gated_rmsnorm = false;
  EXPECT_EQ(rewrite_built_model(plain_norm).gated_delta_net, 0);
}

// (Their logits: the RuntimeGolden tests, which run the fused model.)
TEST(GatedDeltaNet, RuntimeCountsTheFusedNodes) {
  TempDir dir;
  {
    auto ckpt = Checkpoint::open(test::golden_checkpoint());
    build_model(*ckpt, BuildOptions{}, dir / "model");
  }
  auto fast = Model::load(dir / "model");
  auto stock = Model::load(dir / "model", RuntimeOptions{.kernels = {.set = KernelSet::Ort}});
  EXPECT_EQ(fast->fast_kernel_nodes(), 4);  // 3 fused layers + the full-attention layer's GQA
  EXPECT_EQ(stock->fast_kernel_nodes(), 0);
}

// The fused node on fp16 states against stock ORT's kernels on the same file
// (which widen and round the states with Casts at the same points): prefill
// and decode logits agree.
TEST(GatedDeltaNet, Fp16StateLogitsMatchStockOrt) {
  TempDir dir;
  {
    BuildOptions fp16_state;
    fp16_state.state_dtype = FloatType::Fp16;
    auto ckpt = Checkpoint::open(test::golden_checkpoint());
    build_model(*ckpt, fp16_state, dir / "model");
  }
  auto fast = Model::load(dir / "model");
  auto stock = Model::load(dir / "model", RuntimeOptions{.kernels = {.set = KernelSet::Ort}});
  EXPECT_EQ(fast->fast_kernel_nodes(), 4);
  Generator a(*fast, 1, 64), b(*stock, 1, 64);
  const std::vector<int64_t> prompt = {3, 17, 100, 5, 42, 7, 250, 9, 11, 64, 128, 2};
  auto check = [](const Logits& x, const Logits& y, const std::string& what) {
    test::expect_logits_close(x, y, 1e-4, what);
  };
  check(a.forward(prompt, true), b.forward(prompt, true), "prefill");
  for (int64_t token : {5, 77, 300, 12, 40}) {
    const std::vector<int64_t> one = {token};
    check(a.forward(one, false), b.forward(one, false), "decode " + std::to_string(token));
  }
}

}  // namespace
}  // namespace deltagen
