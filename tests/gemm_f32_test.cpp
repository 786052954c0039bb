// The calibration's fp32 GEMM (kernels/gemm_f32.h) against a float64 product,
// at every level this CPU has, on shapes that leave partial tiles, panels,
// column chunks and depth blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/gemm_f32.h"

namespace deltagen::kernels {
namespace {

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

// The relative error of C against the float64 product, worst entry, scaled by
// the entry's sum of absolute products (what fp32 summation error is bounded by).
double worst_error(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
                   int64_t m, int64_t n, int64_t k, bool lower) {
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < (lower ? i + 1 : n); ++j) {
      double exact = 0, size = 0;
      for (int64_t d = 0; d < k; ++d) {
        exact += double(a[size_t(i * k + d)]) * double(b[size_t(j * k + d)]);
        size += std::fabs(double(a[size_t(i * k + d)]) * double(b[size_t(j * k + d)]));
      }
      worst = std::max(worst, std::fabs(double(c[size_t(i * n + j)]) - exact) / size);
    }
  return worst;
}

std::vector<KernelLevel> levels_here() {
  std::vector<KernelLevel> out;
  for (KernelLevel l : {KernelLevel::Scalar, KernelLevel::Avx2, KernelLevel::Avx512})
    if (l <= supported_level()) out.push_back(l);
  return out;
}

TEST(GemmF32, EqualsTheFloat64ProductAtEveryLevel) {
  struct Case { int64_t m, n, k; };
  for (const Case& cs : {Case{1, 1, 1}, Case{7, 33, 300}, Case{13, 530, 517}, Case{64, 40, 1024}}) {
    const auto a = random_floats(cs.m * cs.k, 1), b = random_floats(cs.n * cs.k, 2);
    for (KernelLevel level : levels_here()) {
      SCOPED_TRACE(std::string(level_name(level)) + " m=" + std::to_string(cs.m) + " n=" + std::to_string(cs.n) +
                   " k=" + std::to_string(cs.k));
      std::vector<float> c(size_t(cs.m * cs.n), 99.0f);  // overwritten, not added to
      gemm_nt_f32(a.data(), b.data(), c.data(), {cs.m, cs.n, cs.k}, false, 2, level);
      // fp32 summation over k terms: a few units of 2^-24 times sqrt(k) on random signs, k in the worst case.
      EXPECT_LT(worst_error(a, b, c, cs.m, cs.n, cs.k, false), 1e-6 * double(cs.k) / 16 + 1e-6);
    }
  }
}

TEST(GemmF32, AccumulatesAndKeepsTheLowerTriangleOfAGram) {
  const int64_t m = 300, k = 70;  // x^T x of 70 tokens over 300 channels: A = B = x^T [300][70]
  const auto xt = random_floats(m * k, 3);
  std::vector<float> g(size_t(m * m), 0.0f);
  GemmShape shape{m, m, k};
  shape.lower = true;
  gemm_nt_f32(xt.data(), xt.data(), g.data(), shape, true, 2);
  gemm_nt_f32(xt.data(), xt.data(), g.data(), shape, true, 2);  // twice: 2 x^T x
  for (float& v : g) v /= 2;
  EXPECT_LT(worst_error(xt, xt, g, m, m, k, true), 1e-5);
}

// Wide products split columns between threads, narrow ones (one column
// chunk) rows; alpha scales what is added.
TEST(GemmF32, TheResultDoesNotDependOnTheThreadCount) {
  struct Case { int64_t m, n, k; };
  for (const Case& cs : {Case{37, 1100, 600}, Case{500, 40, 300}}) {
    const auto a = random_floats(cs.m * cs.k, 4), b = random_floats(cs.n * cs.k, 5);
    std::vector<float> one(size_t(cs.m * cs.n), 1.0f), three(size_t(cs.m * cs.n), 1.0f);
    GemmShape shape{cs.m, cs.n, cs.k};
    shape.alpha = -0.5f;
    gemm_nt_f32(a.data(), b.data(), one.data(), shape, true, 1);
    gemm_nt_f32(a.data(), b.data(), three.data(), shape, true, 3);
    EXPECT_EQ(one, three) << cs.m << "x" << cs.n;
    double exact = 1.0;
    for (int64_t d = 0; d < cs.k; ++d) exact -= 0.5 * double(a[size_t(d)]) * double(b[size_t(d)]);
    EXPECT_NEAR(one[0], exact, 1e-4);
  }
}

}  // namespace
}  // namespace deltagen::kernels
