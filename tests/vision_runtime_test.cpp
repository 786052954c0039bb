// Images through the runtime: a --vision build of tiny-vl run by the
// Conversation API (decode, preprocess, vision.onnx, pad expansion, 3-D
// positions, embedding.onnx, the decoder) on deltagen's kernels and on ONNX
// Runtime's, against the goldens and the float64 reference; then the CLI.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "deltagen/deltagen.h"
#include "models/build.h"
#include "reference/qwen35_reference.h"
#include "reference/qwen35_vision_reference.h"
#include "runtime/image_prompt.h"
#include "vision/image_preprocess.h"
#include "test_util.h"
#include "vision_fixtures.h"
#include "util/npy.h"

namespace deltagen::test {
namespace {

// The golden prompt with its one image-pad token (summary.json's ids before expansion).
const std::vector<int64_t> kImagePrompt = {1, 20, 3, 10, 12, 11, 40, 41, 2, 3, 1, 21, 3};

class VisionRuntime : public ::testing::TestWithParam<KernelSet> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    build_tiny_vl(model_dir());
    use_golden_min_pixels(model_dir());
  }
  static void TearDownTestSuite() { delete dir_; }
  static fs::path model_dir() { return dir_->path() / "fp32"; }

  std::shared_ptr<Engine> engine() const {
    EngineOptions o;
    o.threads = 1;
    o.kernels.set = GetParam();
    return Engine::load(model_dir(), o);
  }
  static std::vector<ImageInput> image() {
    return {ImageInput::from_file(vision_golden_dir() / "images" / "img_64x96.png")};
  }

  static TempDir* dir_;
};
TempDir* VisionRuntime::dir_ = nullptr;

// The float64 tower's features of the golden image (its pixel_values file).
Matrix64 reference_features(const VisionReference& vision) {
  const std::vector<double> values = read_npy(vision_golden_file("pixel_values.npy")).as_f64();
  Matrix64 pixels(24, 1536);
  std::copy(values.begin(), values.end(), pixels.data.begin());
  return vision.encode(pixels, {{1, 4, 6}});
}

// The float64 reference's greedy continuation of the golden image prompt.
GreedyResult reference_greedy_on_the_golden_image(int64_t new_tokens) {
  auto ckpt = Checkpoint::open(vision_golden_dir() / "tiny-vl");
  const ReferenceModel ref(*ckpt);
  const VisionReference vision(*ckpt);
  const std::vector<int64_t> expanded = read_npy(vision_golden_file("input_ids.npy")).as_i64();
  return reference_greedy_with_images(ref, expanded, reference_features(vision), {{1, 4, 6}}, new_tokens);
}

// tiny-vl's fp32 distance from float64 (1.6e-4 for text on the text build;
// tests/vision_graph_test.cpp).
constexpr float kTol = 2e-4f;

float max_abs_diff_from_row(const float* a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST_P(VisionRuntime, PromptLogitsMatchTheGolden) {
  Conversation c(engine());
  GenerationOptions o;
  o.max_new_tokens = 1;
  o.collect_logits = true;
  const GenerationResult r = c.generate(std::span<const int64_t>(kImagePrompt), image(), o);
  EXPECT_EQ(r.prompt_tokens, 18);
  EXPECT_EQ(c.tokens().size(), 19u);
  const std::vector<int64_t> expanded(c.tokens().begin(), c.tokens().begin() + 18);
  EXPECT_EQ(expanded, read_npy(vision_golden_file("input_ids.npy")).as_i64());
  const std::vector<float> golden = read_npy(vision_golden_file("logits_prefill.npy")).as_f32();
  ASSERT_GE(r.logits.size(), golden.size());
  EXPECT_LT(max_abs_diff_from_row(r.logits.data(), golden), kTol);
}

// Greedy tokens after the image equal the float64 reference's, whichever way
// the prompt is split into prefill runs (2 tokens cut the image's run).
TEST_P(VisionRuntime, GreedyContinuationEqualsTheReferenceForAnyPrefillChunk) {
  const GreedyResult want = reference_greedy_on_the_golden_image(8);

  for (int64_t chunk : {0, 2, 5}) {
    Conversation c(engine());
    GenerationOptions o;
    o.max_new_tokens = 8;
    o.prefill_chunk = chunk;
    o.collect_logits = true;
    const GenerationResult r = c.generate(std::span<const int64_t>(kImagePrompt), image(), o);
    EXPECT_EQ(r.generated_ids, want.generated) << "prefill chunk " << chunk;
    ASSERT_EQ(r.logits_rows, want.logits.rows);
    float worst = 0;
    for (size_t i = 0; i < want.logits.data.size(); ++i)
      worst = std::max(worst, float(std::fabs(r.logits[i] - want.logits.data[i])));
    EXPECT_LT(worst, kTol) << "prefill chunk " << chunk;
  }
}

// A second turn with a second image continues the positions where the first
// turn left them: the same logits as the reference on the whole sequence.
TEST_P(VisionRuntime, ASecondImageInALaterTurn) {
  Conversation c(engine());
  GenerationOptions o;
  o.max_new_tokens = 2;
  c.generate(std::span<const int64_t>(kImagePrompt), image(), o);
  const std::vector<int64_t> turn2 = {2, 3, 1, 20, 3, 10, 12, 11, 41, 2, 3, 1, 21, 3};
  o.collect_logits = true;
  o.max_new_tokens = 1;
  const GenerationResult r = c.generate(std::span<const int64_t>(turn2), image(), o);

  auto ckpt = Checkpoint::open(vision_golden_dir() / "tiny-vl");
  ReferenceModel ref(*ckpt);
  const Matrix64 one = reference_features(VisionReference(*ckpt));
  Matrix64 both(12, 64);
  std::copy(one.data.begin(), one.data.end(), both.data.begin());
  std::copy(one.data.begin(), one.data.end(), both.data.begin() + 6 * 64);
  const std::vector<int64_t> all = c.tokens();  // both turns, expanded, + the last generated token
  const std::vector<int64_t> fed(all.begin(), all.end() - 1);
  const std::vector<ImageGrid> grids = {{1, 4, 6}, {1, 4, 6}};
  ReferenceState state = ref.new_state();
  const Matrix64 logits = ref.forward_embeds(ref.embed_with_images(fed, both),
                                             mrope_positions(fed, 12, grids, 2), state);
  const int64_t rows = r.logits_rows;
  float worst = 0;
  for (int64_t i = 0; i < rows * 512; ++i)
    worst = std::max(worst, float(std::fabs(r.logits[size_t(i)] -
                                            logits.data[size_t((logits.rows - rows) * 512 + i)])));
  EXPECT_LT(worst, kTol);
}

// A 2800x2400 image (6.7 MP, under the released max_pixels) is scaled to the
// CPU cap: at most kMaxImagePixels / (16 * 16 * 4) image tokens.
TEST_P(VisionRuntime, LargeImagesAreScaledDownToTheCap) {
  const int64_t w = 2800, h = 2400;
  std::string ppm = "P6\n" + std::to_string(w) + " " + std::to_string(h) + "\n255\n";
  ImageInput big;
  big.bytes.assign(ppm.begin(), ppm.end());
  for (int64_t i = 0; i < w * h * 3; ++i) big.bytes.push_back(uint8_t(i * 31 % 251));
  big.origin = "big.ppm";
  Conversation c(engine());
  GenerationOptions o;
  o.max_new_tokens = 1;
  const GenerationResult r = c.generate(std::span<const int64_t>(kImagePrompt), std::vector<ImageInput>{big}, o);
  EXPECT_LE(r.image_tokens, kMaxImagePixels / (16 * 16 * 4));
  EXPECT_GT(r.image_tokens, kMaxImagePixels / (16 * 16 * 4) / 2);
  EXPECT_EQ(r.prompt_tokens, int64_t(kImagePrompt.size()) - 1 + r.image_tokens);
}

TEST_P(VisionRuntime, BadImagesAndPadCountsAreOneLineErrors) {
  Conversation c(engine());
  GenerationOptions o;
  o.max_new_tokens = 1;
  ImageInput bad{{'n', 'o', 't'}, "upload.png"};
  try {
    c.generate(std::span<const int64_t>(kImagePrompt), std::vector<ImageInput>{bad}, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("upload.png:", 0), 0u) << e.what();
  }
  const std::vector<int64_t> no_pad = {1, 20, 3, 40, 41};
  EXPECT_THROW(c.generate(std::span<const int64_t>(no_pad), image(), o), Error);
  EXPECT_EQ(c.length(), 0);
}

INSTANTIATE_TEST_SUITE_P(Kernels, VisionRuntime, ::testing::Values(KernelSet::Deltagen, KernelSet::Ort),
                         [](const auto& info) { return info.param == KernelSet::Ort ? "ort" : "deltagen"; });

TEST(VisionRuntimeErrors, ATextModelRefusesImages) {
  TempDir dir;
  build_tiny_vl(dir / "text", tiny_vl_options(false));
  Conversation c(Engine::load(dir / "text"));
  GenerationOptions g;
  g.max_new_tokens = 1;
  try {
    c.generate(std::span<const int64_t>(kImagePrompt),
               std::vector<ImageInput>{ImageInput::from_file(vision_golden_dir() / "images" / "img_64x96.png")}, g);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--vision"), std::string::npos) << e.what();
  }
}

// The CLI end to end: `generate --image` and `reference --image` agree on a
// resized image (the released preprocessor settings: 64x96 -> 224x320).
TEST(VisionCli, GenerateAndReferenceAgreeOnAnImage) {
  TempDir dir;
  const fs::path ckpt = vision_golden_dir() / "tiny-vl";
  const fs::path png = vision_golden_dir() / "images" / "img_64x96.png";
  CliResult b = run_cli({"build", "--checkpoint", ckpt.string(), "--out", (dir / "m").string(), "--precision", "fp32",
                         "--vision"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string ids = "1,20,3,10,12,11,40,41,2,3,1,21,3";
  CliResult g = run_cli({"generate", "--model", (dir / "m").string(), "--ids", ids, "--image", png.string(),
                         "--max-new-tokens", "6", "--json", "--logits-out", (dir / "g.npy").string()});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  CliResult r = run_cli({"reference", "--checkpoint", ckpt.string(), "--ids", ids, "--image", png.string(),
                         "--max-new-tokens", "6", "--json", "--logits-out", (dir / "r.npy").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto gj = nlohmann::json::parse(g.out), rj = nlohmann::json::parse(r.out);
  EXPECT_EQ(gj["sequences"][0]["prompt_ids"].size(), 13u - 1 + 70);  // 224x320 -> 14x20 patches -> 70 tokens
  EXPECT_EQ(rj["prompt_ids"].size(), 13u - 1 + 70);
  EXPECT_EQ(gj["sequences"][0]["generated_ids"], rj["generated_ids"]);
  const auto gl = read_npy(dir / "g.npy").as_f32(), rl = read_npy(dir / "r.npy").as_f32();
  ASSERT_EQ(gl.size(), rl.size());
  EXPECT_LT(max_abs_diff_from_row(gl.data(), rl), kTol);

  CliResult bad = run_cli({"generate", "--model", (dir / "m").string(), "--ids", ids, "--image",
                           (dir / "missing.png").string()});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("missing.png"), std::string::npos) << bad.err;
}


// Every precision the text model has, with the image: the merge in
// embedding.onnx and the M-RoPE run in the build's activation dtype. fp16
// and int8 keep the float64 reference's 6 greedy tokens on tiny-vl, bf16 (3
// significant digits on a random model's small margins) its first; int4 (1-2
// blocks per row) runs and stays finite.
TEST(VisionPrecisions, EveryPrecisionRunsAnImagePrompt) {
  const GreedyResult want = reference_greedy_on_the_golden_image(6);

  struct Case {
    Precision precision;
    std::optional<FloatType> activations;
    size_t same_tokens;  // leading greedy tokens equal to the reference's
  };
  for (const Case& k : {Case{Precision::Fp16, {}, 6}, Case{Precision::Bf16, {}, 1}, Case{Precision::Int8, {}, 6},
                        Case{Precision::Int4, {}, 0}, Case{Precision::Int4, FloatType::Fp16, 0}}) {
    TempDir dir;
    BuildOptions o = tiny_vl_options();
    o.precision = k.precision;
    if (k.activations) o.activations = *k.activations;
    build_tiny_vl(dir / "m", o);
    use_golden_min_pixels(dir / "m");
    Conversation c(Engine::load(dir / "m"));
    GenerationOptions g;
    g.max_new_tokens = 6;
    g.collect_logits = true;
    const GenerationResult r = c.generate(std::span<const int64_t>(kImagePrompt),
                                          std::vector<ImageInput>{ImageInput::from_file(
                                              vision_golden_dir() / "images" / "img_64x96.png")},
                                          g);
    const std::string name = precision_name(k.precision) + std::string(k.activations ? "+fp16" : "");
    EXPECT_EQ(r.prompt_tokens, 18) << name;
    for (float x : r.logits) ASSERT_TRUE(std::isfinite(x)) << name;
    ASSERT_EQ(r.generated_ids.size(), 6u) << name;
    EXPECT_EQ(std::vector<int64_t>(r.generated_ids.begin(), r.generated_ids.begin() + ptrdiff_t(k.same_tokens)),
              std::vector<int64_t>(want.generated.begin(), want.generated.begin() + ptrdiff_t(k.same_tokens)))
        << name;
  }
}

}  // namespace
}  // namespace deltagen::test
