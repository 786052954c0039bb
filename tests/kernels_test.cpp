// MatMulNBits kernels (src/kernels) against the scalar references built from
// the file layout: every kernel level this CPU has, every block size 16..256,
// symmetric and asymmetric weights, odd shapes, M = 1 and M > 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quantize_activations.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul_nbits.h"
#include "kernels/packed_weights.h"
#include "kernels/matmul_nbits_reference.h"
#include "kernels/thread_pool.h"
#include "kernel_levels.h"

namespace deltagen::kernels {
namespace {

// Random MatMulNBits weights in the file layout. Scales have random signs
// (ORT's symmetric quantizer produces negative ones) and magnitudes that keep
// outputs O(1).
struct RandomWeights {
  NBitsShape shape;
  std::vector<uint8_t> data, zero_points;
  std::vector<float> scales;

  RandomWeights(int64_t n, int64_t k, int block_size, bool asymmetric, std::mt19937& rng, float scale_magnitude = 0.05f) {
    shape = {n, k, 4, block_size};
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> mag(0.5f, 1.5f);
    data.resize(size_t(n * shape.k_blocks() * shape.file_block_bytes()));
    for (auto& b : data) b = uint8_t(byte(rng));
    scales.resize(size_t(n * shape.k_blocks()));
    for (auto& s : scales) s = scale_magnitude * mag(rng) * (byte(rng) & 1 ? 1.0f : -1.0f);
    if (asymmetric) {
      zero_points.resize(size_t(n * shape.zero_point_row_bytes()));
      for (auto& z : zero_points) z = uint8_t(byte(rng));
    }
  }
  NBitsWeightsView view() const {
    return {shape, data.data(), scales.data(), zero_points.empty() ? nullptr : zero_points.data()};
  }
};

std::vector<float> random_activations(int64_t m, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(size_t(m * k));
  for (auto& x : a) x = dist(rng);
  return a;
}

// Σ_k |a[k] w[n][k]| per output: the scale every error bound below is relative to.
std::vector<double> magnitudes(const NBitsWeightsView& w, const std::vector<float>& a, int64_t m) {
  const std::vector<float> deq = dequantize_reference(w);
  std::vector<double> mag(size_t(m * w.shape.n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t n = 0; n < w.shape.n; ++n) {
      double s = 0;
      for (int64_t k = 0; k < w.shape.k; ++k) s += std::fabs(double(a[size_t(i * w.shape.k + k)]) * deq[size_t(n * w.shape.k + k)]);
      mag[size_t(i * w.shape.n + n)] = s;
    }
  return mag;
}

// Worst |got - want| / (mag + tiny) over all outputs.
double worst_relative(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& mag) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (mag[i] + 1e-30));
  return worst;
}

// The int8 GEMV's levels (AMX runs it with the AVX-512 table).
test::LevelsUnderTest q8_levels() { return {KernelLevel::Scalar, KernelLevel::Avx2, KernelLevel::Avx512}; }

struct Case {
  int64_t n, k, m;
};

// Odd sizes on purpose: N not a multiple of 16, K not a multiple of the block.
// M > 64 spans several prefill row blocks; N of 1 to 7 groups leaves every
// remainder of the multi-row tiles (3 groups wide, 4 rows high).
const std::vector<Case> kCases = {{1, 16, 1},  {17, 100, 1},  {45, 257, 3}, {33, 64, 5},
                                  {16, 512, 4}, {70, 333, 9}, {64, 96, 70}, {100, 40, 131}};
const std::vector<int> kBlockSizes = {16, 32, 64, 128, 256};

TEST(Kernels, Int8KernelsMatchTheInt8Reference) {
  std::mt19937 rng(1234);
  const test::LevelsUnderTest levels = q8_levels();
  for (KernelLevel level : levels.runnable)
    for (bool vnni : {true, false}) {
    MatMulConfig config;
    config.level = level;
    config.avx_vnni = vnni;  // the AVX2 table's tiles with and without AVX-VNNI (where the CPU has it)
    for (int bs : kBlockSizes)
      for (bool asym : {false, true})
        for (const Case& c : kCases) {
          SCOPED_TRACE(std::string(level_name(level)) + (vnni ? "" : " no-avx-vnni") + " bs=" + std::to_string(bs) + (asym ? " asym" : " sym") +
                       " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) + " M=" + std::to_string(c.m));
          RandomWeights w(c.n, c.k, bs, asym, rng);
          const auto a = random_activations(c.m, c.k, rng);
          const PackedWeights packed = pack_weights(w.view());
          ASSERT_EQ(packed.scale_format(), ScaleFormat::F16);
          std::vector<float> got(size_t(c.m * c.n)), want(got.size());
          matmul_nbits(packed, a.data(), c.m, nullptr, got.data(), SerialParallel(), config);
          matmul_reference_q8(w.view(), a.data(), c.m, nullptr, want.data(), /*scale_rounding_f16=*/true);
          // Same integers, same scales: only fp32 accumulation order differs.
          EXPECT_LT(worst_relative(got, want, magnitudes(w.view(), a, c.m)), 2e-6);
        }
  }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

// The prefetch setting changes which lines are requested early, never the
// result: every setting gives the default's bits (and bad text is refused).
TEST(Kernels, PrefetchSettingsGiveTheSameBits) {
  EXPECT_FALSE(parse_prefetch("").has_value());
  for (const char* bad : {"l3:64", "l2:", "l2:-1", "l2:12x", "l1:2000000", "L2:64", "l2: 64"})
    EXPECT_FALSE(parse_prefetch(bad).has_value()) << bad;
  ASSERT_TRUE(parse_prefetch("l1:4096").has_value());
  EXPECT_FALSE(parse_prefetch("l1:4096")->to_l2);
  EXPECT_EQ(parse_prefetch("l2:0")->distance, 0);
  EXPECT_TRUE(parse_prefetch("l2:1048576")->to_l2);

  std::mt19937 rng(99);
  RandomWeights w(70, 333, 32, false, rng);
  const PackedWeights packed = pack_weights(w.view());
  const auto a = random_activations(1, 333, rng);
  const test::LevelsUnderTest levels = q8_levels();
  for (KernelLevel level : levels.runnable) {
    MatMulConfig config;
    config.level = level;
    std::vector<float> want(70), got(70);
    matmul_nbits(packed, a.data(), 1, nullptr, want.data(), SerialParallel(), config);
    for (const char* text : {"l1:0", "l1:4096", "l2:64", "l2:1048576"}) {
      config.prefetch = *parse_prefetch(text);
      matmul_nbits(packed, a.data(), 1, nullptr, got.data(), SerialParallel(), config);
      EXPECT_EQ(got, want) << level_name(level) << " " << text;
    }
  }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

// The activation quantizer gives the same bits at every level (the AVX2 and
// AVX-512 blocks and the portable one), NaN and infinities included, and
// rounds half to even as the definition says.
TEST(Kernels, ActivationQuantizationIsTheSameAtEveryLevel) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const test::LevelsUnderTest levels{KernelLevel::Avx2, KernelLevel::Avx512};
  for (int bs : kBlockSizes)
    for (int64_t k : {int64_t(bs), int64_t(3 * bs), int64_t(3 * bs + 5), int64_t(1024)}) {
      std::vector<float> a(static_cast<size_t>(2 * k));
      for (auto& x : a) x = dist(rng);
      a[3] = nan;
      a[size_t(k + 1)] = -inf;
      if (k > 40) a[40] = 0.0f;
      QuantizedRows portable;
      quantize_rows(a.data(), 2, k, k, bs, portable, KernelLevel::Scalar);
      EXPECT_EQ(portable.values[3], 0);  // NaN
      for (KernelLevel level : levels.runnable) {
        QuantizedRows fast;
        quantize_rows(a.data(), 2, k, k, bs, fast, level);
        EXPECT_EQ(portable.values, fast.values) << level_name(level) << " bs " << bs << " k " << k;
        EXPECT_EQ(portable.sums, fast.sums) << level_name(level) << " bs " << bs << " k " << k;
        for (size_t i = 0; i < portable.scales.size(); ++i)
          EXPECT_TRUE(portable.scales[i] == fast.scales[i] || (std::isnan(portable.scales[i]) && std::isnan(fast.scales[i])))
              << level_name(level);
      }
    }
  // Ties round to even: with max|a| = 127 the scale is 1, so a = q exactly.
  std::vector<float> ties(32, 0.0f);
  ties[0] = 127.0f;
  ties[1] = 2.5f;
  ties[2] = -2.5f;
  ties[3] = 3.5f;
  ties[4] = 126.5f;
  std::vector<KernelLevel> tie_levels = levels.runnable;
  tie_levels.push_back(KernelLevel::Scalar);
  for (auto level : tie_levels) {
    QuantizedRows q;
    quantize_rows(ties.data(), 1, 32, 32, 32, q, level);
    EXPECT_EQ(q.values[1], 2) << level_name(level);
    EXPECT_EQ(q.values[2], -2) << level_name(level);
    EXPECT_EQ(q.values[3], 4) << level_name(level);
    EXPECT_EQ(q.values[4], 126) << level_name(level);
    EXPECT_EQ(q.sums[0], 127 + 2 - 2 + 4 + 126) << level_name(level);
  }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

// The int8 path against the exact fp32 result: within the rounding bound of
// the activation quantization (|a - q*s| <= s/2 per element) and of fp16 scales.
TEST(Kernels, Int8PathStaysWithinItsQuantizationBound) {
  std::mt19937 rng(99);
  const KernelLevel level = std::min(supported_level(), KernelLevel::Avx512);
  MatMulConfig config;
  config.level = level;
  for (int bs : kBlockSizes)
    for (bool asym : {false, true}) {
      const int64_t n = 37, k = 300, m = 2;
      RandomWeights w(n, k, bs, asym, rng);
      const auto a = random_activations(m, k, rng);
      const PackedWeights packed = pack_weights(w.view());
      std::vector<float> got(size_t(m * n)), exact(got.size());
      matmul_nbits(packed, a.data(), m, nullptr, got.data(), SerialParallel(), config);
      matmul_reference(w.view(), a.data(), m, nullptr, exact.data());
      QuantizedRows q;
      quantize_rows(a.data(), m, k, k, bs, q);
      const std::vector<float> deq = dequantize_reference(w.view());
      const auto mag = magnitudes(w.view(), a, m);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double bound = 0;
          for (int64_t kk = 0; kk < k; ++kk) bound += std::fabs(deq[size_t(j * k + kk)]) * q.row_scales(i)[kk / bs] / 2;
          bound += mag[size_t(i * n + j)] * (0x1p-11 + 1e-6);
          EXPECT_LE(std::fabs(got[size_t(i * n + j)] - exact[size_t(i * n + j)]), bound) << "bs=" << bs << " n=" << j;
        }
    }
}

TEST(Kernels, AmxBf16PathMatchesTheExactReference) {
  if (supported_level() < KernelLevel::Amx) GTEST_SKIP() << "the AMX bf16 path not tested: this CPU has no AMX (or Linux did not grant it)";
  std::mt19937 rng(7);
  MatMulConfig config;
  config.level = KernelLevel::Amx;
  config.amx_min_rows = 1;  // also exercise M = 1 on tiles
  const std::vector<Case> cases = {{1, 16, 1}, {17, 100, 33}, {45, 257, 17}, {70, 333, 64}, {48, 1024, 40}, {5, 40, 2}};
  for (int bs : kBlockSizes)
    for (bool asym : {false, true})
      for (const Case& c : cases) {
        SCOPED_TRACE("bs=" + std::to_string(bs) + (asym ? " asym" : " sym") + " N=" + std::to_string(c.n) +
                     " K=" + std::to_string(c.k) + " M=" + std::to_string(c.m));
        RandomWeights w(c.n, c.k, bs, asym, rng);
        const auto a = random_activations(c.m, c.k, rng);
        const PackedWeights packed = pack_weights(w.view());
        ASSERT_EQ(effective_level(c.m, config), KernelLevel::Amx);
        std::vector<float> got(size_t(c.m * c.n)), want(got.size());
        matmul_nbits(packed, a.data(), c.m, nullptr, got.data(), SerialParallel(), config);
        matmul_reference(w.view(), a.data(), c.m, nullptr, want.data());
        // bf16 rounds A and the dequantized weights by <= 2^-9 relative each.
        EXPECT_LT(worst_relative(got, want, magnitudes(w.view(), a, c.m)), 0x1p-8 + 0x1p-11);
      }
}

TEST(Kernels, BiasIsAddedOnEveryPath) {
  std::mt19937 rng(5);
  const int64_t n = 21, k = 64, m = 40;
  RandomWeights w(n, k, 32, false, rng);
  const auto a = random_activations(m, k, rng);
  std::vector<float> bias(n);
  for (int64_t i = 0; i < n; ++i) bias[size_t(i)] = float(i) - 10.0f;
  const PackedWeights packed = pack_weights(w.view());
  std::vector<float> want(size_t(m * n));
  matmul_reference(w.view(), a.data(), m, bias.data(), want.data());
  const test::LevelsUnderTest levels{KernelLevel::Scalar, KernelLevel::Avx2, KernelLevel::Avx512, KernelLevel::Amx};
  for (KernelLevel level : levels.runnable) {
    MatMulConfig config;
    config.level = level;
    config.amx_min_rows = 1;
    std::vector<float> got(size_t(m * n));
    matmul_nbits(packed, a.data(), m, bias.data(), got.data(), SerialParallel(), config);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.05) << level_name(level) << " i=" << i;
  }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

// Tasks write disjoint outputs with the same arithmetic: threads change nothing.
TEST(Kernels, ThreadPoolGivesBitIdenticalResults) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  for (int64_t m : {int64_t(1), int64_t(7), int64_t(100)})
    for (bool asym : {false, true}) {
      RandomWeights w(1000, 256, 32, asym, rng);
      const auto a = random_activations(m, 256, rng);
      const PackedWeights packed = pack_weights(w.view());
      std::vector<float> serial(size_t(m * 1000)), threaded(serial.size());
      matmul_nbits(packed, a.data(), m, nullptr, serial.data(), SerialParallel());
      matmul_nbits(packed, a.data(), m, nullptr, threaded.data(), pool);
      EXPECT_EQ(serial, threaded) << "m=" << m << (asym ? " asym" : " sym");
    }
}

TEST(Kernels, EveryRowOfAMultiRowCallIsItsOneRowCall) {
  std::mt19937 rng(21);
  const test::LevelsUnderTest levels = q8_levels();
  ThreadPool pool(2);
  for (KernelLevel level : levels.runnable)
    for (bool vnni : {true, false})
    for (bool compact : {true, false})
      for (int64_t m : {2, 3, 4, 5, 8, 13, 16, 65, 130}) {
        SCOPED_TRACE(std::string(level_name(level)) + (vnni ? "" : " no-avx-vnni") +
                     (compact ? " f16 scales" : " f32 scales") + " M=" + std::to_string(m));
        RandomWeights w(7 * 16 - 5, 96, 32, false, rng);  // 7 groups, the last one partial
        PackOptions options;
        options.compact_scales = compact;
        const PackedWeights packed = pack_weights(w.view(), options);
        const int64_t n = w.shape.n, k = w.shape.k;
        const auto a = random_activations(m, k, rng);
        std::vector<float> bias(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) bias[size_t(i)] = 0.01f * float(i);
        MatMulConfig config;
        config.level = level;
        config.avx_vnni = vnni;
        std::vector<float> rows(static_cast<size_t>(m * n)), one(static_cast<size_t>(n));
        matmul_nbits(packed, a.data(), m, bias.data(), rows.data(), pool, config);
        for (int64_t r = 0; r < m; ++r) {
          matmul_nbits(packed, a.data() + r * k, 1, bias.data(), one.data(), SerialParallel(), config);
          ASSERT_EQ(std::vector<float>(rows.begin() + r * n, rows.begin() + (r + 1) * n), one) << "row " << r;
        }
      }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

TEST(Kernels, ScalesOutsideFp16RangeStayFp32) {
  std::mt19937 rng(3);
  RandomWeights w(20, 64, 32, false, rng);
  EXPECT_EQ(pack_weights(w.view()).scale_format(), ScaleFormat::F16);
  PackOptions exact;
  exact.compact_scales = false;
  EXPECT_EQ(pack_weights(w.view(), exact).scale_format(), ScaleFormat::F32);
  w.scales[7] = 1e-6f;  // an fp16 subnormal: would lose precision
  const PackedWeights packed = pack_weights(w.view());
  EXPECT_EQ(packed.scale_format(), ScaleFormat::F32);
  const auto a = random_activations(1, 64, rng);
  std::vector<float> got(20), want(20);
  matmul_nbits(packed, a.data(), 1, nullptr, got.data(), SerialParallel());
  matmul_reference_q8(w.view(), a.data(), 1, nullptr, want.data(), false);
  for (int i = 0; i < 20; ++i) EXPECT_NEAR(got[size_t(i)], want[size_t(i)], 1e-5);
}

TEST(Kernels, UnsupportedShapesAreRejected) {
  std::mt19937 rng(1);
  RandomWeights w(4, 64, 32, false, rng);
  NBitsWeightsView v = w.view();
  v.shape.bits = 8;
  EXPECT_ANY_THROW(pack_weights(v));
  v = w.view();
  v.shape.block_size = 48;
  EXPECT_ANY_THROW(pack_weights(v));
  v = w.view();
  v.shape.block_size = 512;
  EXPECT_ANY_THROW(pack_weights(v));
}

TEST(Kernels, CpuFeaturesAreConsistent) {
  const CpuFeatures& f = cpu_features();
  if (f.avx512_vnni) EXPECT_TRUE(f.avx512);
  if (f.avx_vnni) EXPECT_TRUE(f.avx2);
  if (f.amx_permitted) EXPECT_TRUE(f.amx_bf16 || f.amx_int8);
  EXPECT_LE(default_level(), supported_level());
  EXPECT_EQ(parse_level("avx2"), KernelLevel::Avx2);
  EXPECT_FALSE(parse_level("sse9"));
}

}  // namespace
}  // namespace deltagen::kernels
