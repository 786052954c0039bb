// The RMSNorms in front of the projections folded into their
// deltagen.MatMulNBits: the kernel against the definition (with and without
// the residual add, serial and threaded), and the rewrite on an int4 build of
// the golden model (every norm in front of a projection folded, the residual
// sums still reach the next layer; the fused session's logits matching the
// per-op one's is SwigluGolden.FusedLogitsMatchThePerOpKernels, which runs
// every fusion).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "checkpoint/checkpoint.h"
#include "kernels/rms_norm.h"
#include "kernels/thread_pool.h"
#include "models/build.h"
#include "ortext/deltagen_ops.h"
#include "rewrite/model_rewrite.h"
#include "test_util.h"

namespace deltagen {
namespace {

using test::TempDir;

TEST(RmsNorm, KernelMatchesTheDefinition) {
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  kernels::ThreadPool pool(2);
  const kernels::SerialParallel serial;
  for (int64_t k : {1, 7, 8, 17, 1024})
    for (int64_t rows : {1, 3, 40})
      for (bool with_skip : {false, true})
        for (bool with_sum : {false, true}) {
          if (with_sum && !with_skip) continue;
          std::vector<float> x(static_cast<size_t>(rows * k)), skip(x.size()), gamma(static_cast<size_t>(k));
          for (auto& v : x) v = dist(rng);
          for (auto& v : skip) v = dist(rng);
          for (auto& v : gamma) v = dist(rng);
          const float eps = 1e-6f;
          std::vector<float> out(x.size()), sum(with_sum ? x.size() : 0);
          kernels::rms_norm_rows(x.data(), with_skip ? skip.data() : nullptr, gamma.data(), rows, k, eps,
                                 with_sum ? sum.data() : nullptr, out.data(),
                                 rows > 3 ? static_cast<const kernels::Parallel&>(pool) : serial);
          for (int64_t r = 0; r < rows; ++r) {
            double squares = 0;
            std::vector<double> s(static_cast<size_t>(k));
            for (int64_t j = 0; j < k; ++j) {
              s[size_t(j)] = double(x[size_t(r * k + j)]) + (with_skip ? double(skip[size_t(r * k + j)]) : 0.0);
              squares += s[size_t(j)] * s[size_t(j)];
            }
            const double inv = 1.0 / std::sqrt(squares / double(k) + eps);
            for (int64_t j = 0; j < k; ++j) {
              const double want = s[size_t(j)] * inv * gamma[size_t(j)];
              ASSERT_NEAR(out[size_t(r * k + j)], want, 1e-5 * (1.0 + std::fabs(want))) << "k " << k << " r " << r;
              if (with_sum) ASSERT_EQ(sum[size_t(r * k + j)], x[size_t(r * k + j)] + skip[size_t(r * k + j)]);
            }
          }
        }
}

TEST(RmsNorm, GoldenModelFoldsEveryNormInFrontOfAProjection) {
  TempDir dir;
  {
    auto ckpt = Checkpoint::open(test::golden_checkpoint());
    BuildOptions options;
    options.precision = "int4";
    options.block_size = 16;
    build_model(*ckpt, options, dir / "model");
  }
  onnx::ModelProto model;
  std::ifstream in(dir / "model" / "model.onnx", std::ios::binary);
  ASSERT_TRUE(model.ParseFromIstream(&in));
  const auto summary = rewrite::use_deltagen_kernels(model);
  // tiny-a, 4 layers: input_layernorm and post_attention_layernorm of each, and the final norm.
  EXPECT_EQ(summary.rmsnorm, 9);
  int with_sum = 0, folded = 0, norms_left = 0;
  for (const auto& node : model.graph().node()) {
    if (node.op_type() == "SkipSimplifiedLayerNormalization") ++norms_left;
    if (node.op_type() == "SimplifiedLayerNormalization") {
      ++norms_left;  // only the attention layer's per-head q_norm and k_norm may stay
      EXPECT_TRUE(node.name().find("q_norm") != std::string::npos || node.name().find("k_norm") != std::string::npos)
          << node.name();
    }
    if (node.op_type() != "MatMulNBits" || node.domain() != "deltagen") continue;
    for (const auto& a : node.attribute())
      if (a.name() == rewrite::kRmsNormAttribute) {
        ++folded;
        with_sum += a.i() == 2;
        EXPECT_EQ(node.input_size(), 8) << node.name();
        EXPECT_EQ(node.output_size(), a.i()) << node.name();
      }
  }
  EXPECT_EQ(folded, 9);
  EXPECT_EQ(norms_left, 2);
  // Every layer's two norms but the first layer's input norm pass the residual on.
  EXPECT_EQ(with_sum, 7);
  onnx::ModelProto per_op;
  std::ifstream again(dir / "model" / "model.onnx", std::ios::binary);
  ASSERT_TRUE(per_op.ParseFromIstream(&again));
  EXPECT_EQ(rewrite::use_deltagen_kernels(per_op, {.fusions = false}).rmsnorm, 0);
}

}  // namespace
}  // namespace deltagen
