// The int4/int8 fitting methods (src/quant/quant_methods.h): each lowers the
// error it minimizes against round-to-nearest on random matrices (property
// tests, no constants), rtn through the method API is block_quant's bytes,
// GPTQ's factor is the Cholesky factor of H^-1, results do not depend on the
// thread count, and what is not implemented or not calibrated is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "deltagen/error.h"
#include "quant/gptq.h"
#include "quant/quant_methods.h"

namespace deltagen::quant {
namespace {

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::student_t_distribution<float> heavy(3.0f);  // a few outliers, as trained weights have
  std::vector<float> w(size_t(rows * cols));
  for (float& x : w) x = normal(rng) + 0.01f * heavy(rng);
  return w;
}

// Calibration inputs with correlated channels of unequal scale (as RMSNorm
// outputs are): x = A z, z standard normal, A random with a few loud columns.
InputStats random_inputs(int64_t k, int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> mix(size_t(k * k));
  for (double& m : mix) m = normal(rng) * 0.3;
  for (int64_t i = 0; i < k; ++i) mix[size_t(i * k + i)] += (i % 7 == 0 ? 4.0 : 1.0);
  InputStats s(k, true);
  std::vector<double> z(static_cast<size_t>(k)), x(static_cast<size_t>(k));
  for (int64_t t = 0; t < tokens; ++t) {
    for (double& v : z) v = normal(rng);
    for (int64_t i = 0; i < k; ++i) {
      double acc = 0;
      for (int64_t j = 0; j < k; ++j) acc += mix[size_t(i * k + j)] * z[size_t(j)];
      x[size_t(i)] = acc;
    }
    s.add(x.data(), 1);
  }
  return s;
}

QuantizedMatrix fit(const std::vector<float>& w, int64_t rows, int64_t cols, const BlockFormat& f,
                    const FitOptions& o, int threads = 1) {
  return quantize_matrix(
      rows, cols, f, o, [&](int64_t r, float* dst) { std::copy_n(&w[size_t(r * cols)], cols, dst); }, threads);
}

std::vector<BlockFormat> formats() {
  return {{4, 32, true}, {4, 32, false}, {4, 128, true}, {8, 32, true}, {4, 16, false}};
}

TEST(QuantMethods, NamesParseBack) {
  for (QuantMethod m : {QuantMethod::Rtn, QuantMethod::Search, QuantMethod::Gptq, QuantMethod::Awq})
    EXPECT_EQ(parse_quant_method(quant_method_name(m)), m);
  EXPECT_FALSE(parse_quant_method("kquant"));
  EXPECT_TRUE(needs_calibration(QuantMethod::Gptq));
  EXPECT_FALSE(needs_calibration(QuantMethod::Search));
}

TEST(QuantMethods, RtnIsBlockQuantsBytes) {
  const int64_t rows = 8, cols = 100;  // K not a multiple of the block: padding
  const std::vector<float> w = random_matrix(rows, cols, 1);
  for (const BlockFormat& f : formats()) {
    const QuantizedMatrix a = fit(w, rows, cols, f, {});
    const QuantizedMatrix b =
        quantize_matrix(rows, cols, f, [&](int64_t r, float* dst) { std::copy_n(&w[size_t(r * cols)], cols, dst); }, 1);
    EXPECT_EQ(a.packed, b.packed);
    EXPECT_EQ(a.scales, b.scales);
    EXPECT_EQ(a.zero_points, b.zero_points);
  }
}

TEST(QuantMethods, SearchLowersTheSquaredError) {
  const int64_t rows = 64, cols = 256;
  const std::vector<float> w = random_matrix(rows, cols, 2);
  const std::vector<double> ones(size_t(cols), 1.0);
  for (const BlockFormat& f : formats()) {
    const double rtn = weighted_error(w, fit(w, rows, cols, f, {}), ones);
    const double search = weighted_error(w, fit(w, rows, cols, f, {.method = QuantMethod::Search}), ones);
    EXPECT_LT(search, rtn * 0.97) << "bits " << f.bits << " block " << f.block_size << " sym " << f.symmetric;
  }
}

TEST(QuantMethods, SearchWithImportanceLowersTheWeightedError) {
  const int64_t rows = 64, cols = 256;
  const std::vector<float> w = random_matrix(rows, cols, 3);
  const InputStats stats = random_inputs(cols, 64, 4);
  const std::vector<double> importance = stats.importance();
  for (const BlockFormat& f : formats()) {
    const double plain = weighted_error(w, fit(w, rows, cols, f, {.method = QuantMethod::Search}), importance);
    const double weighted =
        weighted_error(w, fit(w, rows, cols, f, {.method = QuantMethod::Search, .stats = &stats}), importance);
    EXPECT_LT(weighted, plain) << "bits " << f.bits << " block " << f.block_size;
  }
}

TEST(QuantMethods, GptqLowersTheOutputError) {
  const int64_t rows = 48, cols = 192;
  const std::vector<float> w = random_matrix(rows, cols, 5);
  const InputStats stats = random_inputs(cols, 400, 6);
  for (const BlockFormat& f : formats()) {
    const double rtn = output_error(w, fit(w, rows, cols, f, {}), stats);
    const double search = output_error(w, fit(w, rows, cols, f, {.method = QuantMethod::Search, .stats = &stats}), stats);
    const double gptq = output_error(w, fit(w, rows, cols, f, {.method = QuantMethod::Gptq, .stats = &stats}), stats);
    EXPECT_LT(gptq, search) << "bits " << f.bits << " block " << f.block_size;
    EXPECT_LT(gptq, rtn * 0.8) << "bits " << f.bits << " block " << f.block_size;
  }
}

TEST(QuantMethods, ResultsDoNotDependOnThreads) {
  const int64_t rows = 70, cols = 96;
  const std::vector<float> w = random_matrix(rows, cols, 7);
  const InputStats stats = random_inputs(cols, 100, 8);
  for (QuantMethod m : {QuantMethod::Search, QuantMethod::Gptq}) {
    const FitOptions o{.method = m, .stats = &stats};
    const QuantizedMatrix one = fit(w, rows, cols, {4, 32, false}, o, 1), three = fit(w, rows, cols, {4, 32, false}, o, 3);
    EXPECT_EQ(one.packed, three.packed);
    EXPECT_EQ(one.scales, three.scales);
    EXPECT_EQ(one.zero_points, three.zero_points);
  }
}

TEST(QuantMethods, GptqFactorIsTheCholeskyFactorOfTheInverse) {
 for (const int64_t k : {83, 300}) {  // one block of the factorization; three, the last one short
  SCOPED_TRACE("k = " + std::to_string(k));
  const InputStats stats = random_inputs(k, 400, 9);
  const GptqFactor f = gptq_factor(stats, 0.01);
  // H from the statistics as gptq_factor damps it; then H * (U^T U) = I.
  std::vector<double> h(size_t(k * k));
  double mean = 0;
  for (int64_t i = 0; i < k; ++i) mean += stats.gram[size_t(i * k + i)] / double(stats.tokens);
  mean /= double(k);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j)
      h[size_t(i * k + j)] = stats.gram[size_t(std::max(i, j) * k + std::min(i, j))] / double(stats.tokens) +
                             (i == j ? 0.01 * mean : 0.0);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < i; ++j) EXPECT_EQ(f.u[size_t(i * k + j)], 0.0f);  // upper triangular
    for (int64_t j = 0; j < k; ++j) {
      double hinv_col = 0;  // (H U^T U)[i][j]
      for (int64_t m = 0; m < k; ++m) {
        double utu = 0;
        for (int64_t l = 0; l < k; ++l) utu += double(f.u[size_t(l * k + m)]) * double(f.u[size_t(l * k + j)]);
        hinv_col += h[size_t(i * k + m)] * utu;
      }
      EXPECT_NEAR(hinv_col, i == j ? 1.0 : 0.0, 1e-4) << i << "," << j;
    }
  }
 }
}

TEST(QuantMethods, ScalesAreFittedAsStored) {
  const int64_t rows = 16, cols = 64;
  const std::vector<float> w = random_matrix(rows, cols, 10);
  const QuantizedMatrix q =
      fit(w, rows, cols, {4, 32, true}, {.method = QuantMethod::Search, .scales = ScaleStorage::F16});
  for (float s : q.scales) EXPECT_EQ(s, stored_scale(s, ScaleStorage::F16));
}

TEST(QuantMethods, RefusesWhatItCannotDo) {
  const std::vector<float> w = random_matrix(4, 32, 11);
  EXPECT_THROW(fit(w, 4, 32, {4, 32, true}, {.method = QuantMethod::Gptq}), Error);  // no calibration
  InputStats diag_only(32, false);
  EXPECT_THROW(fit(w, 4, 32, {4, 32, true}, {.method = QuantMethod::Gptq, .stats = &diag_only}), Error);
  EXPECT_THROW(fit(w, 4, 32, {4, 32, true}, {.method = QuantMethod::Awq}), Error);
  EXPECT_THROW(check_quant_method(QuantMethod::Awq), Error);
}

}  // namespace
}  // namespace deltagen::quant
