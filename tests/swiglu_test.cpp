// The MLP's SwiGLU folded into down_proj's deltagen.MatMulNBits: the kernel
// against the definition at every level, and the rewrite on an int4 build of
// the golden model (every MLP fused; the fused session's logits match the
// per-op one's, prefill and decode).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <vector>

#include <onnx/onnx_pb.h>

#include "checkpoint/checkpoint.h"
#include "kernels/swiglu.h"
#include "models/build.h"
#include "reference/qwen35_ops.h"
#include "rewrite/model_rewrite.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "test_util.h"
#include "kernel_levels.h"

namespace deltagen {
namespace {

using test::TempDir;

TEST(Swiglu, KernelMatchesTheDefinitionAtEveryLevel) {
  const test::LevelsUnderTest levels{kernels::KernelLevel::Scalar, kernels::KernelLevel::Avx2, kernels::KernelLevel::Avx512};
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> dist(-12.0f, 12.0f);
  for (int64_t k : {1, 15, 16, 33, 3584})
    for (int64_t rows : {1, 3}) {
      std::vector<float> x(size_t(rows * 2 * k));
      for (auto& v : x) v = dist(rng);
      for (auto level : levels.runnable) {
        std::vector<float> out(size_t(rows * k));
        kernels::swiglu(x.data(), rows, k, out.data(), level);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < k; ++j) {
            const double g = x[size_t(r * 2 * k + j)], u = x[size_t(r * 2 * k + k + j)];
            const double want = ref::silu(g) * u;  // the reference model's MLP activation
            ASSERT_NEAR(out[size_t(r * k + j)], want, 1e-5 * (1.0 + std::fabs(want)))
                << kernels::level_name(level) << " k " << k << " r " << r << " j " << j;
          }
      }
    }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

class SwigluGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    auto ckpt = Checkpoint::open(test::golden_checkpoint());
    BuildOptions options;
    options.precision = Precision::Int4;
    options.block_size = 16;
    build_model(*ckpt, options, *dir_ / "model");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static inline TempDir* dir_ = nullptr;
};

TEST_F(SwigluGolden, EveryMlpIsFolded) {
  onnx::ModelProto model;
  std::ifstream in(*dir_ / "model" / "model.onnx", std::ios::binary);
  ASSERT_TRUE(model.ParseFromIstream(&in));
  const auto summary = rewrite::use_deltagen_kernels(model);
  EXPECT_EQ(summary.swiglu, 4);  // tiny-a: 4 layers
  int sigmoids = 0;
  for (const auto& node : model.graph().node()) sigmoids += node.op_type() == "Sigmoid";
  EXPECT_EQ(sigmoids, 1);  // the full-attention layer's output gate remains
  onnx::ModelProto per_op;
  std::ifstream again(*dir_ / "model" / "model.onnx", std::ios::binary);
  ASSERT_TRUE(per_op.ParseFromIstream(&again));
  EXPECT_EQ(rewrite::use_deltagen_kernels(per_op, {.fusions = false}).swiglu, 0);
}

TEST_F(SwigluGolden, FusedLogitsMatchThePerOpKernels) {
  auto fused = Model::load(*dir_ / "model");
  auto per_op = Model::load(*dir_ / "model", RuntimeOptions{.kernels = {.set = KernelSet::DeltagenOps}});
  Generator a(*fused, 1, 64), b(*per_op, 1, 64);
  std::vector<int64_t> prompt = {3, 17, 100, 5, 42, 7, 250, 9, 11, 64, 128, 2};
  auto check = [](const Logits& x, const Logits& y, const std::string& what) {
    test::expect_logits_close(x, y, 1e-4, what);
  };
  check(a.forward(prompt, true), b.forward(prompt, true), "prefill");
  for (int64_t token : {5, 77, 300}) {
    const std::vector<int64_t> one = {token};
    check(a.forward(one, false), b.forward(one, false), "decode");
  }
}

}  // namespace
}  // namespace deltagen
