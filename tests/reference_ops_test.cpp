// The oracle's pieces (reference/qwen35_ops.h) on properties that follow from
// their definitions, independent of any golden file: the kernel tests and the
// reference model both trust these functions, so each gets a check that a
// slip in it (a wrong pairing, a missing 1 + w, a stale state) would fail.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "reference/qwen35_ops.h"

namespace deltagen {
namespace {

TEST(ReferenceOps, OffsetNormIsThePlainNormWithOnePlusTheWeight) {
  std::vector<double> x = {0.5, -2.0, 3.0, 1.25, -0.75}, offsets = {0.1, -0.2, 0.0, 0.3, -0.5}, plain_w(5);
  for (size_t i = 0; i < 5; ++i) plain_w[i] = 1.0 + offsets[i];
  std::vector<double> a = x, b = x;
  ref::offset_rms_norm(a.data(), offsets.data(), 5, 1e-6);
  ref::rms_norm(b.data(), plain_w.data(), 5, 1e-6);
  for (size_t i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(a[i], b[i]);
  // With unit weights the result has a mean square of 1 (up to eps).
  const std::vector<double> ones(5, 1.0);
  ref::rms_norm(x.data(), ones.data(), 5, 0.0);
  EXPECT_NEAR(ref::dot(x.data(), x.data(), 5) / 5, 1.0, 1e-12);
}

TEST(ReferenceOps, PartialRopeTurnsPairsIHalfApartAndLeavesTheRestAlone) {
  const std::vector<double> inv_freq = ref::rope_inv_freq(10000.0, 4);  // head 8, rotary_dim 4
  ASSERT_EQ(inv_freq.size(), 2u);
  EXPECT_DOUBLE_EQ(inv_freq[1], std::pow(10000.0, -0.5));
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<double> at0 = x, at5 = x;
  ref::rope(at0.data(), inv_freq, 0);
  EXPECT_EQ(at0, x);  // position 0: no turn
  ref::rope(at5.data(), inv_freq, 5);
  for (size_t d = 4; d < 8; ++d) EXPECT_EQ(at5[d], x[d]) << d;  // past rotary_dim
  for (size_t i = 0; i < 2; ++i) {  // dim i turns with dim i + 2, by the angle 5 * inv_freq[i]
    const double angle = 5 * inv_freq[i];
    EXPECT_NEAR(at5[i], x[i] * std::cos(angle) - x[i + 2] * std::sin(angle), 1e-12);
    EXPECT_NEAR(at5[i + 2], x[i + 2] * std::cos(angle) + x[i] * std::sin(angle), 1e-12);
  }
}

TEST(ReferenceOps, ConvStepShiftsTheWindowAndWeighsTheNewestInputLast) {
  const int64_t K = 3;
  std::vector<double> window(K, 0.0);
  const std::vector<double> newest_only = {0, 0, 1}, oldest_only = {1, 0, 0};
  EXPECT_EQ(ref::causal_conv_step(window.data(), newest_only.data(), K, 7.0), 7.0);
  EXPECT_EQ(ref::causal_conv_step(window.data(), oldest_only.data(), K, 8.0), 0.0);  // still a zero there
  EXPECT_EQ(ref::causal_conv_step(window.data(), oldest_only.data(), K, 9.0), 7.0);
  EXPECT_EQ(window, (std::vector<double>{7, 8, 9}));
}

// With beta 1 and no decay, the delta rule stores v under the unit key k
// exactly: reading the state back with k gives v, whatever it held before.
TEST(ReferenceOps, DeltaRuleWithBetaOneWritesTheValueUnderItsKey) {
  const int64_t dk = 3, dv = 2;
  std::vector<double> S = {0.3, -1.0, 2.0, 0.5, -0.7, 0.1};  // [dk][dv]
  std::vector<double> k = {1.0, 2.0, -2.0}, v = {4.0, -3.0}, out(dv);
  ref::l2_normalize(k.data(), dk, 0.0);
  ref::delta_rule_step(S.data(), k.data(), k.data(), v.data(), 1.0, 1.0, dk, dv, out.data());
  for (int64_t j = 0; j < dv; ++j) EXPECT_NEAR(out[size_t(j)], v[size_t(j)], 1e-12);  // o = S^T q with q = k
  // The decay applies before the update: a zero step (beta 0) only shrinks S.
  std::vector<double> shrunk = S;
  ref::delta_rule_step(shrunk.data(), k.data(), k.data(), v.data(), 0.0, 0.5, dk, dv, out.data());
  for (size_t i = 0; i < S.size(); ++i) EXPECT_DOUBLE_EQ(shrunk[i], 0.5 * S[i]);
  EXPECT_DOUBLE_EQ(ref::delta_decay(-2.0, 30.0, 0.0), std::exp(-60.0));  // softplus is linear above 20
}

TEST(ReferenceOps, AttentionIsASoftmaxWeightedMeanOfTheValues) {
  const int64_t hd = 2;
  const std::vector<double> q = {1.0, 0.0}, keys = {0.0, 0.0, std::log(3.0), 0.0}, values = {1.0, 10.0, 5.0, -2.0};
  std::vector<double> out(hd);
  ref::attend(q.data(), keys.data(), values.data(), 1, hd, 1.0, out.data());
  EXPECT_EQ(out, (std::vector<double>{1.0, 10.0}));  // one visible row: its value
  ref::attend(q.data(), keys.data(), values.data(), 2, hd, 1.0, out.data());
  EXPECT_NEAR(out[0], 0.25 * 1.0 + 0.75 * 5.0, 1e-12);  // scores 0 and log 3: weights 1/4, 3/4
  EXPECT_NEAR(out[1], 0.25 * 10.0 + 0.75 * -2.0, 1e-12);
}

}  // namespace
}  // namespace deltagen
