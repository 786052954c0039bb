// The float64 vision tower, the 3-D (M-RoPE) positions and the text model on
// merged image embeddings, against the golden set of shared/golden/vision
// (tiny-vl, one 64x96 image, an 18-token prompt). Every expected value comes
// from the golden files; nothing is hard-coded but the hand-made position
// cases of the MropePositions suite.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "deltagen/error.h"
#include "reference/qwen35_ops.h"
#include "reference/qwen35_reference.h"
#include "reference/qwen35_vision_reference.h"
#include "test_util.h"
#include "util/npy.h"
#include "vision/mrope_positions.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::max_abs_diff;
using test::vision_golden_dir;
using test::vision_golden_file;

// The golden files written as float32 by the golden set's own float64
// implementation: only their float32 rounding differs (values up to ~10).
constexpr double kF32FileTol = 1e-5;
// HF transcribed in float32 (image_features.npy, logits_prefill.npy are the
// float64 implementation rounded to float32; the README's bound for an fp32 port).
constexpr double kGoldenTol = 1e-4;
// HF transcribed in float64: it computes the bilinear weights in float32 (README 2.2).
constexpr double kHf64Tol = 1e-5;
// The golden set's float64 implementation (ref64_*): fp64 rounding only.
constexpr double kRef64Tol = 1e-9;
// Different splits of one prompt into forward calls.
constexpr double kSplitTol = 1e-9;

std::vector<double> golden(const std::string& name) { return read_npy(vision_golden_file(name)).as_f64(); }
std::vector<int64_t> golden_i64(const std::string& name) { return read_npy(vision_golden_file(name)).as_i64(); }
std::vector<int64_t> golden_shape(const std::string& name) { return read_npy(vision_golden_file(name)).shape; }

nlohmann::json small_case() {
  std::ifstream in(vision_golden_dir() / "golden" / "summary.json");
  return nlohmann::json::parse(in).at("cases").at("small");
}

void report(const std::string& what, double diff) {
  std::printf("[ measured ] %-48s max |diff| = %.3g\n", what.c_str(), diff);
  ::testing::Test::RecordProperty(what, std::to_string(diff));
}

// The processor's pixel rows (README 2.1 steps 3-5) in float64, from the
// golden uint8 image [H][W][3], which is already a multiple of 32 on both
// sides (the resize is the identity): x = (u8 / 255 - 0.5) / 0.5, the still
// image repeated to `temporal` frames, rows in merge-block-major patch order,
// each row [channel][frame][py][px]. pixel_values.npy holds the same rows
// rounded to float32; the golden float64 outputs were computed from these.
Matrix64 patchify(const std::vector<int64_t>& u8, int64_t H, int64_t W, const VisionConfig& v) {
  const int64_t P = v.patch_size, T = v.temporal_patch_size, m = v.spatial_merge_size, C = v.in_channels;
  const int64_t gh = H / P, gw = W / P;
  Matrix64 out(gh * gw, v.patch_dim());
  int64_t r = 0;
  for (int64_t bh = 0; bh < gh / m; ++bh)
    for (int64_t bw = 0; bw < gw / m; ++bw)
      for (int64_t ih = 0; ih < m; ++ih)
        for (int64_t iw = 0; iw < m; ++iw, ++r) {
          const int64_t row = bh * m + ih, col = bw * m + iw;
          double* x = out.row(r);
          for (int64_t c = 0; c < C; ++c)
            for (int64_t t = 0; t < T; ++t)
              for (int64_t py = 0; py < P; ++py)
                for (int64_t px = 0; px < P; ++px) {
                  const int64_t y = row * P + py, xx = col * P + px;
                  *x++ = (double(u8[size_t((y * W + xx) * C + c)]) / 255.0 - 0.5) / 0.5;
                }
        }
  return out;
}

std::vector<double> concat_rows(const Matrix64& a, const Matrix64& b) {
  std::vector<double> v = a.data;
  v.insert(v.end(), b.data.begin(), b.data.end());
  return v;
}

class VisionReferenceGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ckpt_ = Checkpoint::open(vision_golden_dir() / "tiny-vl");
    vision_ = std::make_unique<VisionReference>(*ckpt_);
    model_ = std::make_unique<ReferenceModel>(*ckpt_);

    const NpyArray image = read_npy(vision_golden_file("image_uint8.npy"));
    pixels_ = patchify(image.as_i64(), image.shape.at(0), image.shape.at(1), vision_->config());
    const std::vector<int64_t> thw = golden_i64("image_grid_thw.npy");
    grids_ = {ImageGrid{thw.at(0), thw.at(1), thw.at(2)}};
    ids_ = golden_i64("input_ids.npy");
    features_ = vision_->encode(pixels_, grids_, &trace_);
  }
  static void TearDownTestSuite() {
    model_.reset();
    vision_.reset();
    ckpt_.reset();
  }

  static const ModelConfig& config() { return model_->config(); }
  static int64_t merge() { return config().vision->spatial_merge_size; }
  static MropePositions positions(const std::vector<int64_t>& ids, int64_t start = 0) {
    return mrope_positions(ids, config().image_token_id, grids_, merge(), start);
  }
  static Matrix64 prefill(ReferenceState& st) {
    return model_->forward_embeds(model_->embed_with_images(ids_, features_), positions(ids_), st);
  }

  static std::unique_ptr<Checkpoint> ckpt_;
  static std::unique_ptr<VisionReference> vision_;
  static std::unique_ptr<ReferenceModel> model_;
  static Matrix64 pixels_, features_;
  static std::vector<ImageGrid> grids_;
  static std::vector<int64_t> ids_;
  static VisionTrace trace_;
};
std::unique_ptr<Checkpoint> VisionReferenceGolden::ckpt_;
std::unique_ptr<VisionReference> VisionReferenceGolden::vision_;
std::unique_ptr<ReferenceModel> VisionReferenceGolden::model_;
Matrix64 VisionReferenceGolden::pixels_, VisionReferenceGolden::features_;
std::vector<ImageGrid> VisionReferenceGolden::grids_;
std::vector<int64_t> VisionReferenceGolden::ids_;
VisionTrace VisionReferenceGolden::trace_;

// ---- the vision tower ------------------------------------------------------------------------

TEST_F(VisionReferenceGolden, PixelValuesFromTheImage) {
  const NpyArray pv = read_npy(vision_golden_file("pixel_values.npy"));
  ASSERT_EQ(pv.shape, (std::vector<int64_t>{pixels_.rows, pixels_.cols}));
  EXPECT_EQ(pixels_.rows, grids_[0].t * grids_[0].h * grids_[0].w);
  const double d = max_abs_diff(pixels_.data, pv.as_f64());
  report("pixel_values.npy (float32 rounding)", d);
  EXPECT_LT(d, 1e-7);
  // The float32 rows give the same features up to that rounding.
  Matrix64 rounded(pv.shape[0], pv.shape[1]);
  rounded.data = pv.as_f64();
  const Matrix64 f = vision_->encode(rounded, grids_);
  const double df = max_abs_diff(f.data, features_.data);
  report("features of pixel_values.npy vs of the image", df);
  EXPECT_LT(df, 1e-6);
  EXPECT_LT(max_abs_diff(f.data, golden("image_features.npy")), kGoldenTol);
}

TEST_F(VisionReferenceGolden, PatchEmbedding) {
  ASSERT_EQ(golden_shape("vision_patch_embed.npy"), (std::vector<int64_t>{trace_.patch_embed.rows, trace_.patch_embed.cols}));
  const double d = max_abs_diff(trace_.patch_embed.data, golden("vision_patch_embed.npy"));
  report("vision_patch_embed.npy", d);
  EXPECT_LT(d, kF32FileTol);
}

TEST_F(VisionReferenceGolden, PositionEmbedding) {
  ASSERT_EQ(golden_shape("vision_pos_embeds.npy"), (std::vector<int64_t>{trace_.pos_embed.rows, trace_.pos_embed.cols}));
  const double d = max_abs_diff(trace_.pos_embed.data, golden("vision_pos_embeds.npy"));
  report("vision_pos_embeds.npy", d);
  EXPECT_LT(d, kF32FileTol);
  const double hf = max_abs_diff(trace_.pos_embed.data, golden("hf64_pos_embeds.npy"));
  report("hf64_pos_embeds.npy (fp32 bilinear weights)", hf);
  EXPECT_LT(hf, kHf64Tol);
}

TEST_F(VisionReferenceGolden, RotaryPositionsExact) {
  const std::vector<int64_t> want = golden_i64("vision_rot_position_ids.npy");
  ASSERT_EQ(golden_shape("vision_rot_position_ids.npy"), (std::vector<int64_t>{int64_t(trace_.rot_positions.size()), 2}));
  std::vector<int64_t> got;
  for (const auto& rc : trace_.rot_positions) got.insert(got.end(), rc.begin(), rc.end());
  EXPECT_EQ(got, want);
}

TEST_F(VisionReferenceGolden, BlockOutputs) {
  const int64_t depth = vision_->config().depth;
  ASSERT_EQ(int64_t(trace_.blocks.size()), depth);
  ASSERT_EQ(golden_shape("vision_block_out.npy"),
            (std::vector<int64_t>{depth, trace_.blocks[0].rows, trace_.blocks[0].cols}));
  std::vector<double> flat;
  for (const Matrix64& b : trace_.blocks) flat.insert(flat.end(), b.data.begin(), b.data.end());
  const double d = max_abs_diff(flat, golden("vision_block_out.npy"));
  report("vision_block_out.npy", d);
  EXPECT_LT(d, kF32FileTol);
}

TEST_F(VisionReferenceGolden, ImageFeatures) {
  ASSERT_EQ(golden_shape("ref64_image_features.npy"), (std::vector<int64_t>{features_.rows, features_.cols}));
  EXPECT_EQ(features_.rows, image_token_count(grids_[0], merge()));
  EXPECT_EQ(features_.cols, config().hidden_size);
  const double d64 = max_abs_diff(features_.data, golden("ref64_image_features.npy"));
  const double d32 = max_abs_diff(features_.data, golden("image_features.npy"));
  const double hf64 = max_abs_diff(features_.data, golden("hf64_image_features.npy"));
  const double hf32 = max_abs_diff(features_.data, golden("hf32_image_features.npy"));
  report("ref64_image_features.npy", d64);
  report("image_features.npy", d32);
  report("hf64_image_features.npy", hf64);
  report("hf32_image_features.npy", hf32);
  EXPECT_LT(d64, kRef64Tol);
  EXPECT_LT(d32, kGoldenTol);
  EXPECT_LT(hf64, kHf64Tol);
  EXPECT_LT(hf32, kGoldenTol);
}

TEST_F(VisionReferenceGolden, EncodeRejectsBadShapes) {
  Matrix64 narrow(pixels_.rows, pixels_.cols - 1);
  test::expect_error([&] { vision_->encode(narrow, grids_); }, "pixel rows");
  test::expect_error([&] { vision_->encode(pixels_, {ImageGrid{1, 4, 4}}); }, "16 patches");
  test::expect_error([&] { vision_->encode(pixels_, {ImageGrid{1, 4, 6}, ImageGrid{1, 2, 2}}); }, "more than");
  test::expect_error([&] { vision_->encode(pixels_, {ImageGrid{1, 3, 8}}); }, "multiples");
}

// ---- placeholders, positions, merged embeddings -------------------------------------------

TEST_F(VisionReferenceGolden, ExpandsTheSinglePlaceholder) {
  const nlohmann::json c = small_case();
  EXPECT_EQ(c.at("input_ids").get<std::vector<int64_t>>(), ids_);
  // The prompt as the chat template writes it: one <|image_pad|> per image.
  const int64_t pad = config().image_token_id;
  std::vector<int64_t> template_ids;
  for (int64_t id : ids_)
    if (id != pad || template_ids.empty() || template_ids.back() != pad) template_ids.push_back(id);
  ASSERT_EQ(std::count(template_ids.begin(), template_ids.end(), pad), 1);
  const int64_t n = image_token_count(grids_[0], merge());
  EXPECT_EQ(n, c.at("num_image_tokens").get<int64_t>());
  EXPECT_EQ(expand_image_pads(template_ids, pad, {n}, "prompt"), ids_);
}

TEST_F(VisionReferenceGolden, PositionIdsAndRopeDeltaExact) {
  const MropePositions p = positions(ids_);
  std::vector<int64_t> got = p.t;
  got.insert(got.end(), p.h.begin(), p.h.end());
  got.insert(got.end(), p.w.begin(), p.w.end());
  ASSERT_EQ(golden_shape("position_ids.npy"), (std::vector<int64_t>{3, int64_t(ids_.size())}));
  EXPECT_EQ(got, golden_i64("position_ids.npy"));
  EXPECT_EQ(p.rope_delta, golden_i64("rope_deltas.npy").at(0));
  EXPECT_EQ(p.rope_delta, small_case().at("rope_delta").get<int64_t>());
  EXPECT_EQ(p.next, int64_t(ids_.size()) + p.rope_delta);  // the prompt ends in text
}

// The M-RoPE angles of every prompt token: rotating [1..1 | 0..0] leaves
// cos in the first half and sin in the second.
TEST_F(VisionReferenceGolden, TextRotaryCosSin) {
  const MropePositions p = positions(ids_);
  const std::vector<double> inv_freq = ref::rope_inv_freq(config().rope_theta, config().rotary_dim());
  const int64_t half = int64_t(inv_freq.size());
  const int64_t section[3] = {config().mrope_section[0], config().mrope_section[1], config().mrope_section[2]};
  std::vector<double> cos, sin;
  for (size_t t = 0; t < ids_.size(); ++t) {
    std::vector<double> x(size_t(2 * half), 0.0);
    std::fill(x.begin(), x.begin() + half, 1.0);
    ref::mrope(x.data(), inv_freq, section, p.t[t], p.h[t], p.w[t]);
    for (int rep = 0; rep < 2; ++rep) {  // emb = [freqs, freqs]
      cos.insert(cos.end(), x.begin(), x.begin() + half);
      sin.insert(sin.end(), x.begin() + half, x.end());
    }
  }
  ASSERT_EQ(golden_shape("text_rope_cos.npy"), (std::vector<int64_t>{int64_t(ids_.size()), 2 * half}));
  const double dc = max_abs_diff(cos, golden("text_rope_cos.npy")), ds = max_abs_diff(sin, golden("text_rope_sin.npy"));
  report("text_rope_cos.npy", dc);
  report("text_rope_sin.npy", ds);
  EXPECT_LT(dc, kF32FileTol);
  EXPECT_LT(ds, kF32FileTol);
}

TEST_F(VisionReferenceGolden, MergedEmbeddings) {
  const Matrix64 e = model_->embed_with_images(ids_, features_);
  ASSERT_EQ(golden_shape("inputs_embeds.npy"), (std::vector<int64_t>{e.rows, e.cols}));
  const double d = max_abs_diff(e.data, golden("inputs_embeds.npy"));
  report("inputs_embeds.npy", d);
  EXPECT_LT(d, kF32FileTol);
  // Text rows are the plain embeddings.
  const Matrix64 plain = model_->embed(ids_);
  for (int64_t t = 0; t < e.rows; ++t) {
    if (ids_[size_t(t)] == config().image_token_id) continue;
    EXPECT_TRUE(std::equal(e.row(t), e.row(t) + e.cols, plain.row(t))) << "row " << t;
  }
}

TEST_F(VisionReferenceGolden, MergedEmbeddingsNeedOneRowPerImageToken) {
  Matrix64 fewer(features_.rows - 1, features_.cols);
  test::expect_error([&] { model_->embed_with_images(ids_, fewer); }, "image tokens");
  Matrix64 narrow(features_.rows, features_.cols + 1);
  test::expect_error([&] { model_->embed_with_images(ids_, narrow); }, "wide");
}

// ---- the text model on the merged embeddings ---------------------------------------------

TEST_F(VisionReferenceGolden, PrefillLogits) {
  ReferenceState st = model_->new_state();
  const Matrix64 logits = prefill(st);
  ASSERT_EQ(golden_shape("ref64_logits_prefill.npy"), (std::vector<int64_t>{logits.rows, logits.cols}));
  const double d64 = max_abs_diff(logits.data, golden("ref64_logits_prefill.npy"));
  const double d32 = max_abs_diff(logits.data, golden("logits_prefill.npy"));
  report("ref64_logits_prefill.npy", d64);
  report("logits_prefill.npy", d32);
  EXPECT_LT(d64, kRef64Tol);
  EXPECT_LT(d32, kGoldenTol);
  EXPECT_EQ(st.position, int64_t(ids_.size()));
  EXPECT_EQ(st.rope_delta, golden_i64("rope_deltas.npy").at(0));
  const double* last = logits.row(logits.rows - 1);
  EXPECT_EQ(std::max_element(last, last + logits.cols) - last, small_case().at("argmax_last").get<int64_t>());
}

// Prefill 12 tokens (the image included), then the rest one token at a
// time: as decode steps (forward, position + rope_delta) and as
// forward_embeds calls positioned from the state.
TEST_F(VisionReferenceGolden, SplitPrefillGivesSameLogits) {
  ReferenceState one = model_->new_state();
  const Matrix64 whole = prefill(one);
  const size_t split = 12;
  const Matrix64 embeds = model_->embed_with_images(ids_, features_);
  const std::vector<int64_t> head(ids_.begin(), ids_.begin() + split);
  Matrix64 head_embeds(int64_t(split), embeds.cols);
  std::copy(embeds.data.begin(), embeds.data.begin() + int64_t(split) * embeds.cols, head_embeds.data.begin());

  for (bool decode : {true, false}) {
    SCOPED_TRACE(decode ? "forward" : "forward_embeds");
    ReferenceState st = model_->new_state();
    std::vector<double> all = model_->forward_embeds(head_embeds, positions(head), st).data;
    for (size_t t = split; t < ids_.size(); ++t) {
      const Matrix64 step =
          decode ? model_->forward({ids_[t]}, st)
                 : model_->forward_embeds(model_->embed({ids_[t]}),
                                          mrope_positions({ids_[t]}, config().image_token_id, {}, merge(),
                                                          st.position + st.rope_delta),
                                          st);
      all.insert(all.end(), step.data.begin(), step.data.end());
    }
    const double d = max_abs_diff(all, whole.data);
    report(std::string("prefill 12 + ") + (decode ? "forward" : "forward_embeds") + " steps vs one call", d);
    EXPECT_LT(d, kSplitTol);
    EXPECT_EQ(st.position, one.position);
    EXPECT_EQ(st.rope_delta, one.rope_delta);
  }
}

// A chat continued after a cached prefix: the first turn's text, then a turn
// that brings the image, positioned from the previous call's `next`.
TEST_F(VisionReferenceGolden, ImageInALaterTurnContinuesThePositions) {
  ReferenceState one = model_->new_state();
  const Matrix64 whole = prefill(one);
  const Matrix64 embeds = model_->embed_with_images(ids_, features_);
  const size_t split = 3;  // <|im_start|> user \n | <|vision_start|> <|image_pad|> ...
  const std::vector<int64_t> first(ids_.begin(), ids_.begin() + split), second(ids_.begin() + split, ids_.end());
  Matrix64 e1(int64_t(first.size()), embeds.cols), e2(int64_t(second.size()), embeds.cols);
  std::copy(embeds.data.begin(), embeds.data.begin() + e1.rows * e1.cols, e1.data.begin());
  std::copy(embeds.data.begin() + e1.rows * e1.cols, embeds.data.end(), e2.data.begin());

  ReferenceState st = model_->new_state();
  const MropePositions p1 = mrope_positions(first, config().image_token_id, {}, merge());
  const Matrix64 l1 = model_->forward_embeds(e1, p1, st);
  EXPECT_EQ(p1.next, st.position + st.rope_delta);
  const MropePositions p2 = positions(second, p1.next);
  const Matrix64 l2 = model_->forward_embeds(e2, p2, st);

  // The same positions as one call on the whole prompt, and the same logits.
  const MropePositions all = positions(ids_);
  std::vector<int64_t> t = p1.t, h = p1.h, w = p1.w;
  t.insert(t.end(), p2.t.begin(), p2.t.end());
  h.insert(h.end(), p2.h.begin(), p2.h.end());
  w.insert(w.end(), p2.w.begin(), p2.w.end());
  EXPECT_EQ(t, all.t);
  EXPECT_EQ(h, all.h);
  EXPECT_EQ(w, all.w);
  EXPECT_EQ(p1.rope_delta + p2.rope_delta, all.rope_delta);
  EXPECT_EQ(st.rope_delta, all.rope_delta);
  const double d = max_abs_diff(concat_rows(l1, l2), whole.data);
  report("text turn + image turn vs one call", d);
  EXPECT_LT(d, kSplitTol);
}

TEST_F(VisionReferenceGolden, GreedyContinuationIsDeterministic) {
  const int64_t n = 6;
  const GreedyResult a = reference_greedy_with_images(*model_, ids_, features_, grids_, n);
  const GreedyResult b = reference_greedy_with_images(*model_, ids_, features_, grids_, n);
  ASSERT_EQ(int64_t(a.generated.size()), n);
  EXPECT_EQ(a.generated, b.generated);
  EXPECT_EQ(a.logits.data, b.logits.data);
  EXPECT_EQ(a.generated[0], small_case().at("argmax_last").get<int64_t>());
  EXPECT_EQ(a.logits.rows, int64_t(ids_.size()) + n - 1);
  // The prompt rows are the prefill's.
  ReferenceState st = model_->new_state();
  const Matrix64 logits = prefill(st);
  EXPECT_TRUE(std::equal(logits.data.begin(), logits.data.end(), a.logits.data.begin()));
  // Step j is the decode of generated[j - 1] at position + rope_delta.
  for (int64_t j = 1; j < n; ++j) {
    const Matrix64 step = model_->forward({a.generated[size_t(j - 1)]}, st);
    EXPECT_TRUE(std::equal(step.data.begin(), step.data.end(), a.logits.row(int64_t(ids_.size()) - 1 + j)));
  }
}

// With every stream at the token's index, forward_embeds is forward().
TEST_F(VisionReferenceGolden, TextPositionsReduceToForward) {
  const std::vector<int64_t> ids = {1, 20, 3, 40, 41, 2, 3, 1, 21, 3};
  ReferenceState a = model_->new_state(), b = model_->new_state();
  const Matrix64 want = model_->forward(ids, a);
  const MropePositions p = mrope_positions(ids, config().image_token_id, {}, merge());
  EXPECT_EQ(p.rope_delta, 0);
  const Matrix64 got = model_->forward_embeds(model_->embed(ids), p, b);
  EXPECT_EQ(got.data, want.data);
  EXPECT_EQ(b.rope_delta, 0);
}

TEST_F(VisionReferenceGolden, ForwardEmbedsChecksShapes) {
  ReferenceState st = model_->new_state();
  const Matrix64 e = model_->embed({1, 20});
  const MropePositions three = mrope_positions({1, 20, 3}, config().image_token_id, {}, merge());
  test::expect_error([&] { model_->forward_embeds(e, three, st); }, "rotary positions");
  EXPECT_EQ(st.position, 0);
}

// ---- errors -----------------------------------------------------------------------------------

TEST(VisionReferenceErrors, CheckpointWithoutVisionTower) {
  const fs::path text_only = test::golden_checkpoint();  // tiny-a: a text model
  auto ck = Checkpoint::open(text_only);
  ASSERT_FALSE(ck->has_vision());
  test::expect_error([&] { VisionReference v(*ck); }, text_only.string());
  test::expect_error([&] { VisionReference v(*ck); }, "no vision tower");
}

// ---- positions: hand-made cases (no golden files) -------------------------------------------

constexpr int64_t kPad = 12;

TEST(MropePositions, ImageTokenCount) {
  EXPECT_EQ(image_token_count({1, 4, 6}, 2), 6);
  EXPECT_EQ(image_token_count({2, 4, 4}, 2), 8);
  EXPECT_THROW(image_token_count({1, 3, 4}, 2), Error);
  EXPECT_THROW(image_token_count({0, 4, 4}, 2), Error);
  EXPECT_THROW(image_token_count({1, 0, 4}, 2), Error);
}

TEST(MropePositions, ExpandImagePads) {
  EXPECT_EQ(expand_image_pads({1, kPad, 2, kPad, 3}, kPad, {2, 3}, "p"),
            (std::vector<int64_t>{1, kPad, kPad, 2, kPad, kPad, kPad, 3}));
  EXPECT_EQ(expand_image_pads({1, 2}, kPad, {}, "p"), (std::vector<int64_t>{1, 2}));
  test::expect_error([] { expand_image_pads({1, kPad, 2}, kPad, {2, 3}, "my prompt"); }, "my prompt: ");
  test::expect_error([] { expand_image_pads({1, kPad, kPad}, kPad, {2}, "my prompt"); }, "2 image placeholders");
}

TEST(MropePositions, TextOnlyIsTheIndex) {
  const MropePositions p = mrope_positions({5, 6, 7}, kPad, {}, 2, 10);
  EXPECT_EQ(p.t, (std::vector<int64_t>{10, 11, 12}));
  EXPECT_EQ(p.h, p.t);
  EXPECT_EQ(p.w, p.t);
  EXPECT_EQ(p.rope_delta, 0);
  EXPECT_EQ(p.next, 13);
  const MropePositions empty = mrope_positions({}, kPad, {}, 2, 7);
  EXPECT_EQ(empty.size(), 0);
  EXPECT_EQ(empty.rope_delta, 0);
  EXPECT_EQ(empty.next, 7);
}

// Two images (a tall one and a video-like t = 2 one): raster order, the
// counter advancing by max(h, w) / merge after each.
TEST(MropePositions, TwoImages) {
  // image 0: grid (1, 6, 2) -> 3 x 1 merged; image 1: grid (2, 2, 4) -> 2 frames of 1 x 2
  const std::vector<ImageGrid> grids = {{1, 6, 2}, {2, 2, 4}};
  const std::vector<int64_t> ids = {1, 10, kPad, kPad, kPad, 11, 10, kPad, kPad, kPad, kPad, 11, 3};
  const MropePositions p = mrope_positions(ids, kPad, grids, 2);
  EXPECT_EQ(p.t, (std::vector<int64_t>{0, 1, 2, 2, 2, 5, 6, 7, 7, 8, 8, 9, 10}));
  EXPECT_EQ(p.h, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 9, 10}));
  EXPECT_EQ(p.w, (std::vector<int64_t>{0, 1, 2, 2, 2, 5, 6, 7, 8, 7, 8, 9, 10}));
  EXPECT_EQ(p.next, 11);
  EXPECT_EQ(p.rope_delta, 11 - 13);
  // Cut after the first image's vision_end, continued from `next`: the same positions.
  const std::vector<int64_t> a(ids.begin(), ids.begin() + 6), b(ids.begin() + 6, ids.end());
  const MropePositions pa = mrope_positions(a, kPad, {grids[0]}, 2);
  const MropePositions pb = mrope_positions(b, kPad, {grids[1]}, 2, pa.next);
  std::vector<int64_t> t = pa.t;
  t.insert(t.end(), pb.t.begin(), pb.t.end());
  EXPECT_EQ(t, p.t);
  EXPECT_EQ(pa.rope_delta + pb.rope_delta, p.rope_delta);
}

TEST(MropePositions, RunsMustMatchTheImages) {
  const std::vector<ImageGrid> one = {{1, 4, 6}};
  std::vector<int64_t> five = {1, 10, kPad, kPad, kPad, kPad, kPad, 11};
  test::expect_error([&] { mrope_positions(five, kPad, one, 2); }, "needs a run of 6");
  std::vector<int64_t> none = {1, 10, 11};
  test::expect_error([&] { mrope_positions(none, kPad, one, 2); }, "0 runs of image tokens for 1 images");
  std::vector<int64_t> two = {1, kPad, kPad, kPad, kPad, kPad, kPad, 3, kPad, kPad, kPad, kPad, kPad, kPad};
  test::expect_error([&] { mrope_positions(two, kPad, one, 2); }, "no image grid");
  // Two images' runs with nothing between them read as one run of the wrong length.
  std::vector<int64_t> glued(12, kPad);
  test::expect_error([&] { mrope_positions(glued, kPad, {one[0], one[0]}, 2); }, "needs a run of 6");
}

// Equal streams: M-RoPE is RoPE bit for bit, whatever the section.
TEST(MropePositions, EqualStreamsAreRope) {
  const std::vector<double> inv_freq = ref::rope_inv_freq(1e7, 8);
  const int64_t section[3] = {2, 1, 1};
  for (int64_t pos : {0, 1, 17, 4095}) {
    std::vector<double> a = {0.3, -1.2, 0.7, 2.0, -0.5, 0.1, 1.1, -0.9, 0.25, 0.5}, b = a;
    ref::rope(a.data(), inv_freq, pos);
    ref::mrope(b.data(), inv_freq, section, pos, pos, pos);
    EXPECT_EQ(a, b) << pos;
  }
  // Different streams: frequency 1 turns by H, 2 by W, 0 and 3 by T.
  std::vector<double> x(8, 0.0);
  std::fill(x.begin(), x.begin() + 4, 1.0);
  ref::mrope(x.data(), inv_freq, section, 3, 5, 7);
  const int64_t stream[4] = {3, 5, 7, 3};
  for (int j = 0; j < 4; ++j) {
    EXPECT_DOUBLE_EQ(x[size_t(j)], std::cos(double(stream[j]) * inv_freq[size_t(j)])) << j;
    EXPECT_DOUBLE_EQ(x[size_t(j + 4)], std::sin(double(stream[j]) * inv_freq[size_t(j)])) << j;
  }
}

TEST(ReferenceOpsVision, LayerNormAndGelu) {
  std::vector<double> x = {1.0, 2.0, 3.0, 6.0};
  const std::vector<double> w = {1.0, 2.0, 1.0, 0.5}, b = {0.0, 0.0, 1.0, -1.0};
  ref::layer_norm(x.data(), w.data(), b.data(), 4, 0.0);
  const double mean = 3.0, sd = std::sqrt((4.0 + 1.0 + 0.0 + 9.0) / 4.0);
  EXPECT_NEAR(x[0], (1 - mean) / sd, 1e-15);
  EXPECT_NEAR(x[1], 2 * (2 - mean) / sd, 1e-15);
  EXPECT_NEAR(x[2], 1.0, 1e-15);
  EXPECT_NEAR(x[3], 0.5 * (6 - mean) / sd - 1.0, 1e-15);
  EXPECT_EQ(ref::gelu_erf(0.0), 0.0);
  EXPECT_NEAR(ref::gelu_erf(1.0), 0.8413447460685429, 1e-15);   // x * Phi(x)
  EXPECT_NEAR(ref::gelu_tanh(1.0), 0.8411919906082768, 1e-15);  // the tanh form
  EXPECT_NEAR(ref::gelu_tanh(-3.0), ref::gelu_erf(-3.0), 1e-3);
}

}  // namespace
}  // namespace deltagen
