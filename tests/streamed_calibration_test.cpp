// Calibration that streams the checkpoint one layer at a time
// (models/streamed_calibration.h) against the float64 reference's resident
// calibration (models/calibration.h), and the streamed reference model it
// runs on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "checkpoint/checkpoint.h"
#include "deltagen/error.h"
#include "models/calibration.h"
#include "models/streamed_calibration.h"
#include "reference/qwen35_reference.h"
#include "synth/synth.h"
#include "test_util.h"

namespace deltagen {
namespace {

std::vector<int64_t> random_ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t& x : ids) x = id(rng);
  return ids;
}

// A streamed float64 model that loads every layer in turn gives the resident
// model's residual stream bit for bit; a layer it has not loaded is an Error.
TEST(StreamedReference, LayerByLayerIsTheResidentForwardPass) {
  const auto ckpt = Checkpoint::open(test::golden_checkpoint());
  const ReferenceModel resident(*ckpt);
  ReferenceModel streamed(*ckpt, {.streamed = true});
  const int64_t layers = resident.config().num_hidden_layers;
  const std::vector<int64_t> ids = random_ids(9, resident.config().vocab_size, 1);

  Matrix64 expected = resident.embed(ids);
  ReferenceState rs = resident.new_state();
  resident.run_layers(0, expected, rs);

  Matrix64 h = streamed.embed(ids);
  ReferenceState ss = streamed.new_state();
  EXPECT_THROW(streamed.run_layers(0, 1, h, ss, nullptr), Error);
  for (int64_t i = 0; i < layers; ++i) {
    streamed.load_layer(i);
    streamed.run_layers(i, i + 1, h, ss, nullptr);
    streamed.release_layer(i);
  }
  EXPECT_EQ(h.data, expected.data);
  EXPECT_EQ(ss.position, rs.position);
}

// Every site's statistics: the same sites in the same order, the same token
// count, and each Gram entry within 1e-4 of the float64 one on the scale of
// its row and column (|G_ij| <= sqrt(G_ii G_jj)). The streamed inputs come
// through fp32 products and the sums are fp32 (relative error ~1e-6 per
// layer on these widths), so 1e-4 leaves a margin of about 10x over what the
// eight layers compound to, and is far below what changes a GPTQ fit.
TEST(StreamedCalibration, GramMatricesEqualTheFloat64ReferencesWithinTolerance) {
  const auto ckpt = Checkpoint::open(test::golden_checkpoint());
  const ReferenceModel model(*ckpt);
  CalibrationOptions o;
  o.max_tokens = 40;
  o.window = 16;  // three windows, the last one short
  const std::vector<int64_t> ids = random_ids(48, model.config().vocab_size, 2);
  const Calibration resident = calibrate(model, ids, o);
  Calibration streamed = calibrate_streamed(*ckpt, ids, o);

  ASSERT_EQ(streamed.sites.size(), resident.sites.size());
  EXPECT_EQ(streamed.tokens, 40);
  double worst_site = 0;
  for (size_t s = 0; s < resident.sites.size(); ++s) {
    const CalibrationSite& r = resident.sites[s];
    ASSERT_EQ(streamed.sites[s].weights, r.weights);
    ASSERT_NE(streamed.sites[s].spilled, nullptr) << "the Gram matrix waits on disk";
    EXPECT_FALSE(streamed.sites[s].spilled->linked()) << "in a file without a name, gone when closed";
    const std::shared_ptr<const quant::InputStats> got = streamed.find(r.weights.front());
    ASSERT_NE(got, nullptr);
    ASSERT_TRUE(got->full());
    EXPECT_EQ(got->tokens, r.stats->tokens);
    const int64_t k = r.stats->k;
    ASSERT_EQ(got->k, k);
    double worst = 0;
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        const double scale = std::sqrt(r.stats->gram[size_t(i * k + i)] * r.stats->gram[size_t(j * k + j)]);
        if (scale == 0) continue;
        worst = std::max(worst, std::fabs(got->gram[size_t(i * k + j)] - r.stats->gram[size_t(i * k + j)]) / scale);
      }
    EXPECT_LT(worst, 1e-4) << r.weights.front();
    worst_site = std::max(worst_site, worst);
    for (int64_t i = 0; i < k; ++i)
      EXPECT_NEAR(got->diag[size_t(i)], r.stats->diag[size_t(i)], 1e-4 * r.stats->diag[size_t(i)]) << r.weights.front();
  }
  std::printf("worst Gram entry error, relative to its row and column: %.2e\n", worst_site);
}

// The prediction grows with the calibration, and for the 4B shape it is what
// makes streaming worth it: within 6 GB streamed, beyond this machine's 24 GB
// resident (the float64 weights alone are ~34 GB).
TEST(StreamedCalibration, PredictedMemoryFollowsTheModel) {
  const ModelConfig c = synth_preset("4b");
  CalibrationOptions o;
  const int64_t small = streamed_calibration_bytes(c, 256, o), large = streamed_calibration_bytes(c, 8192, o);
  EXPECT_GT(large, small);
  EXPECT_LT(streamed_calibration_bytes(c, 1024, o), int64_t(6e9));
  EXPECT_GT(resident_calibration_bytes(c, 1024, o), int64_t(24e9));
  o.full_gram = false;  // the scale search keeps diagonals only
  EXPECT_LT(streamed_calibration_bytes(c, 1024, o), small);
  o.full_gram = true;
  for (const char* preset : {"0.8b", "4b", "9b", "27b", "35b-a3b"}) {  // for docs/quantization.md
    const ModelConfig p = synth_preset(preset);
    std::printf("gptq calibration, 1024 tokens, predicted peak: %-8s streamed %6.2f GB, resident %7.1f GB\n", preset,
                double(streamed_calibration_bytes(p, 1024, o)) / 1e9, double(resident_calibration_bytes(p, 1024, o)) / 1e9);
  }
}

}  // namespace
}  // namespace deltagen
