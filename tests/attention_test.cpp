// deltagen.GroupQueryAttention: the kernel against the definition in double
// (every level this CPU has; decode and prompts continuing a cache, batch rows
// at different lengths, rotary inside or not), and a model whose attention
// takes its rotary inside (head_dim 64) run on deltagen's kernels against
// ORT's own, through the fused gated form (its projection's split, q/k norms and
// output gate folded in: attention_fusion.h). (The golden runtime tests cover
// the rotary-outside form, which keeps those nodes.)
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "checkpoint/checkpoint.h"
#include "kernels/attention.h"
#include "models/build.h"
#include "ortext/deltagen_ops.h"
#include "reference/qwen35_ops.h"
#include "rewrite/model_rewrite.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "synth/synth.h"
#include "test_util.h"
#include "kernel_levels.h"

namespace deltagen {
namespace {

using kernels::AttentionShape;
using test::TempDir;

std::vector<float> uniform_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct Case {
  AttentionShape s;
  std::vector<int32_t> seqlens;
};

TEST(Attention, KernelMatchesTheDefinitionAtEveryLevel) {
  const test::LevelsUnderTest levels{kernels::KernelLevel::Scalar, kernels::KernelLevel::Avx2, kernels::KernelLevel::Avx512};
  std::mt19937 rng(31);
  // {batch, seq, heads, kv_heads, head_dim, capacity, rotary_dim, rotary_positions}
  const Case cases[] = {{{2, 1, 8, 2, 32, 40, 16, 64}, {9, 30}},      // decode, rows at different lengths
                        {{1, 7, 4, 2, 16, 20, 0, 0}, {11}},           // a prompt chunk after 5 cached tokens
                        {{2, 40, 6, 3, 24, 48, 8, 48}, {39, 44}},     // prompts in two blocks of tokens
                        {{1, 1, 4, 4, 256, 8, 64, 8}, {7}}};          // Qwen3.5's head_dim, plain multi-head
  for (const Case& c : cases) {
    const AttentionShape& s = c.s;
    const int64_t hd = s.head_dim, half = s.rotary_dim / 2;
    auto q = uniform_values(size_t(s.batch * s.seq * s.heads * hd), rng);
    auto k = uniform_values(size_t(s.batch * s.seq * s.kv_heads * hd), rng);
    auto v = uniform_values(k.size(), rng);
    auto cache_k = uniform_values(size_t(s.batch * s.kv_heads * s.capacity * hd), rng);
    auto cache_v = uniform_values(cache_k.size(), rng);
    auto cos = uniform_values(size_t(std::max<int64_t>(1, s.rotary_positions * half)), rng);
    auto sin = uniform_values(cos.size(), rng);

    // The definition, from the reference model's pieces (reference/qwen35_ops.h):
    // new keys/values into copies of the caches, then attention. The tables
    // give each position's angles: row pos holds cos/sin of its half pairs.
    const std::vector<double> cos64(cos.begin(), cos.end()), sin64(sin.begin(), sin.end());
    auto rotate = [&](std::vector<double>& x, int64_t pos) {
      if (half) ref::rotate_half(x.data(), cos64.data() + pos * half, sin64.data() + pos * half, half);
    };
    std::vector<double> want(q.size());
    std::vector<float> want_k = cache_k, want_v = cache_v;
    for (int64_t b = 0; b < s.batch; ++b) {
      const int64_t first = c.seqlens[size_t(b)] + 1 - s.seq;
      for (int64_t i = 0; i < s.seq; ++i)
        for (int64_t g = 0; g < s.kv_heads; ++g) {
          const size_t src = size_t(((b * s.seq + i) * s.kv_heads + g) * hd);
          std::vector<double> key(k.begin() + long(src), k.begin() + long(src + size_t(hd)));
          rotate(key, first + i);
          const size_t dst = size_t(((b * s.kv_heads + g) * s.capacity + first + i) * hd);
          for (int64_t d = 0; d < hd; ++d) want_k[dst + size_t(d)] = float(key[size_t(d)]), want_v[dst + size_t(d)] = v[src + size_t(d)];
        }
      // The kernel reads its cache in float: so does the definition.
      const std::vector<double> keys(want_k.begin(), want_k.end()), values(want_v.begin(), want_v.end());
      for (int64_t i = 0; i < s.seq; ++i)
        for (int64_t h = 0; h < s.heads; ++h) {
          const int64_t g = h / (s.heads / s.kv_heads), pos = first + i;
          const size_t qi = size_t(((b * s.seq + i) * s.heads + h) * hd), kv = size_t((b * s.kv_heads + g) * s.capacity * hd);
          std::vector<double> qv(q.begin() + long(qi), q.begin() + long(qi + size_t(hd)));
          rotate(qv, pos);
          ref::attend(qv.data(), keys.data() + kv, values.data() + kv, pos + 1, hd, 1.0 / std::sqrt(double(hd)),
                      want.data() + qi);
        }
    }

    std::vector<std::vector<float>> outs;  // by level
    for (auto level : levels.runnable) {
      std::vector<float> out(q.size()), got_k = cache_k, got_v = cache_v;
      kernels::AttentionTensors t{q.data(), k.data(), v.data(), got_k.data(), got_v.data(), c.seqlens.data(),
                                  half ? cos.data() : nullptr, half ? sin.data() : nullptr, out.data()};
      kernels::attention(s, float(1.0 / std::sqrt(double(hd))), t, kernels::SerialParallel(), level);
      for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 2e-5) << kernels::level_name(level) << " " << i;
      for (size_t i = 0; i < got_k.size(); ++i) ASSERT_NEAR(got_k[i], want_k[i], 1e-6) << i;
      EXPECT_EQ(got_v, want_v);
      outs.push_back(out);
    }
    // The AVX2 blocks do the AVX-512 file's arithmetic at half the width.
    if (outs.size() == 3) EXPECT_EQ(outs[1], outs[2]) << "avx2 vs avx512";
  }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

// A prompt split into runs anywhere gives every row the same bits as one run:
// whether a task has many rows (keys in blocks) or a few (key by key), and
// however many rows share a block, a row's arithmetic is the same. The
// prompt cache depends on it (a restored state plus the rest = one run).
TEST(Attention, ARowsOutputDoesNotDependOnHowThePromptIsSplit) {
  const test::LevelsUnderTest levels{kernels::KernelLevel::Scalar, kernels::KernelLevel::Avx2, kernels::KernelLevel::Avx512};
  std::mt19937 rng(7);
  for (const AttentionShape& whole : {AttentionShape{1, 45, 8, 2, 256, 64, 64, 64}, AttentionShape{1, 45, 6, 3, 24, 64, 8, 64}}) {
    const int64_t hd = whole.head_dim, half = whole.rotary_dim / 2, seq = whole.seq;
    const auto q = uniform_values(size_t(seq * whole.heads * hd), rng);
    const auto k = uniform_values(size_t(seq * whole.kv_heads * hd), rng);
    const auto v = uniform_values(k.size(), rng);
    const auto cos = uniform_values(size_t(whole.rotary_positions * half), rng), sin = uniform_values(cos.size(), rng);
    for (auto level : levels.runnable) {
      // Runs [cuts[i], cuts[i+1]) into one cache; cuts {0, seq} is the single run.
      auto run = [&](const std::vector<int64_t>& cuts) {
        std::vector<float> cache_k(size_t(whole.kv_heads * whole.capacity * hd)), cache_v(cache_k.size());
        std::vector<float> out(q.size());
        for (size_t c = 0; c + 1 < cuts.size(); ++c) {
          AttentionShape s = whole;
          s.seq = cuts[c + 1] - cuts[c];
          const std::vector<int32_t> seqlens = {int32_t(cuts[c + 1] - 1)};
          const size_t qo = size_t(cuts[c] * whole.heads * hd), ko = size_t(cuts[c] * whole.kv_heads * hd);
          kernels::AttentionTensors t{q.data() + qo, k.data() + ko, v.data() + ko, cache_k.data(), cache_v.data(),
                                      seqlens.data(), cos.data(), sin.data(), out.data() + qo};
          kernels::attention(s, 0.125f, t, kernels::SerialParallel(), level);
        }
        return out;
      };
      const std::vector<float> one = run({0, seq});
      for (const auto& cuts : std::vector<std::vector<int64_t>>{{0, 1, seq}, {0, 33, 34, 45}, {0, 2, 5, 38, 45}, {0, 44, 45}})
        EXPECT_EQ(run(cuts), one) << kernels::level_name(level) << " head_dim " << hd << " cut at " << cuts[1];
    }
  }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

TEST(Attention, PositionsBeyondTheCacheAreAnError) {
  const AttentionShape s{1, 1, 2, 1, 16, 4, 0, 0};
  std::vector<float> q(32), k(16), v(16), ck(64), cv(64), out(32);
  const std::vector<int32_t> seqlens = {4};  // position 4 in a cache of 4
  kernels::AttentionTensors t{q.data(), k.data(), v.data(), ck.data(), cv.data(), seqlens.data(), nullptr, nullptr,
                              out.data()};
  EXPECT_THROW(kernels::attention(s, 0.25f, t, kernels::SerialParallel()), Error);
}

void build_rotary_inside_model(const TempDir& dir) {
  ModelConfig cfg = synth_preset("tiny");
  cfg.head_dim = 64;  // rotary dim 16: the builder puts the rotary inside GroupQueryAttention
  write_synthetic_checkpoint(cfg, SynthOptions{.seed = 3}, dir / "ckpt");
  auto ckpt = Checkpoint::open(dir / "ckpt");
  build_model(*ckpt, BuildOptions{}, dir / "model");
}

TEST(Attention, GatedFormFoldsIntoTheAttentionNode) {
  TempDir dir;
  build_rotary_inside_model(dir);
  auto rewrite = [&](const rewrite::RewriteOptions& options, onnx::ModelProto& model) {
    std::ifstream in(dir / "model" / "model.onnx", std::ios::binary);
    EXPECT_TRUE(model.ParseFromIstream(&in));
    return rewrite::use_deltagen_kernels(model, options);
  };
  onnx::ModelProto fused, per_op;
  EXPECT_EQ(rewrite({}, fused).gated_attention, 1);  // tiny: one full-attention layer
  EXPECT_EQ(rewrite({.fusions = false}, per_op).gated_attention, 0);
  auto attention_nodes = [](const onnx::ModelProto& model) {
    int n = 0;
    for (const auto& node : model.graph().node()) n += node.name().find("/attn/") != std::string::npos;
    return n;
  };
  EXPECT_EQ(attention_nodes(per_op) - attention_nodes(fused), 11);
  int gated = 0;
  for (const auto& node : fused.graph().node()) {
    const std::string& name = node.name();
    if (name.find("/attn/") == std::string::npos) continue;
    EXPECT_TRUE(node.op_type() == "GroupQueryAttention" || node.op_type() == "MatMul") << name;
    if (node.op_type() != "GroupQueryAttention") continue;
    ++gated;
    ASSERT_EQ(node.input_size(), 11);
    EXPECT_TRUE(node.input(1).empty() && node.input(2).empty());
    EXPECT_NE(node.input(0).find("qkv_proj"), std::string::npos) << node.input(0);
    EXPECT_NE(node.input(9).find("q_norm"), std::string::npos) << node.input(9);
    EXPECT_NE(node.input(10).find("k_norm"), std::string::npos) << node.input(10);
  }
  EXPECT_EQ(gated, 1);
}

TEST(Attention, RotaryInsideModelMatchesOrtsKernels) {
  TempDir dir;
  build_rotary_inside_model(dir);
  auto fast = Model::load(dir / "model");
  auto stock = Model::load(dir / "model", RuntimeOptions{.kernels = {.set = KernelSet::Ort}});
  EXPECT_EQ(fast->fast_kernel_nodes(), 4);  // 3 fused linear-attention layers + the attention
  Generator a(*fast, 1, 64), b(*stock, 1, 64);
  auto check = [](const Logits& x, const Logits& y, const char* what) {
    ASSERT_EQ(x.data.size(), y.data.size());
    for (size_t i = 0; i < x.data.size(); ++i) ASSERT_NEAR(x.data[i], y.data[i], 1e-4) << what << " " << i;
  };
  const std::vector<int64_t> prompt = {5, 99, 3, 250, 17, 42, 8, 300, 11};
  check(a.forward(std::span(prompt).first(6), true), b.forward(std::span(prompt).first(6), true), "prompt");
  check(a.forward(std::span(prompt).subspan(6), true), b.forward(std::span(prompt).subspan(6), true), "chunk");
  for (int64_t token : {7, 400, 2}) {
    const std::vector<int64_t> one = {token};
    check(a.forward(one, false), b.forward(one, false), "decode");
  }
}

}  // namespace
}  // namespace deltagen
