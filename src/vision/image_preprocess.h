// Qwen3.5's image preprocessing, as the Hugging Face Qwen2-VL image processor
// (the "slow", PIL-based one) does it: smart_resize to a multiple of
// patch * merge within [min_pixels, max_pixels], bicubic resize, rescale and
// normalize, repeat to temporal_patch_size frames, and cut into patches in
// merge-block-major order. The facts: ../shared/golden/vision/README.md §2.1.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "vision/image_decode.h"

namespace deltagen {

// The defaults are the released Qwen3.5 preprocessor_config.json (HF's class
// defaults differ: patch 14, CLIP mean and std).
struct PreprocessorConfig {
  int64_t patch_size = 16, temporal_patch_size = 2, merge_size = 2;
  int64_t min_pixels = 65536, max_pixels = 16777216;
  double rescale_factor = 1 / 255.;
  std::array<double, 3> mean{0.5, 0.5, 0.5}, std{0.5, 0.5, 0.5};
  bool do_resize = true, do_rescale = true, do_normalize = true;
};

// Reads HF's preprocessor_config.json. A key the file lacks keeps the default
// above; min/max pixels come from size.shortest_edge/longest_edge, and a
// top-level min_pixels/max_pixels (older files) overrides them, as in HF.
// Throws Error("<file>: <key>: <problem>") for a bad value. Whether a missing
// file means the defaults is the caller's decision.
PreprocessorConfig load_preprocessor_config(const std::filesystem::path& json_file);

// The most pixels an image keeps on deltagen's CPU path (after smart_resize):
// 2 MP = 8192 patches, 2048 image tokens; the tower's attention then holds
// 12 x 8192^2 floats (3.2 GB) on the 0.8B shape. The released max_pixels
// (16.7 MP) suits a GPU's fused attention, not a CPU.
inline constexpr int64_t kMaxImagePixels = int64_t(1) << 21;

// What the runtime and `reference --image` preprocess with: `folder`'s
// preprocessor_config.json (a checkpoint's, or the copy a build keeps), else
// the released Qwen3.5 settings; max_pixels capped at kMaxImagePixels, so a
// larger image is scaled down as smart_resize scales any image above it.
PreprocessorConfig preprocessor_config_in(const std::filesystem::path& folder);

// HF's smart_resize: the (height, width) an image is resized to, both
// multiples of `factor`, with about the same aspect ratio and a pixel count in
// [min_pixels, max_pixels]. Python's round-half-to-even, and the
// max(factor, ...) form when shrinking. Throws for an aspect ratio above 200
// or a result with a zero side.
std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                         int64_t max_pixels);

// PIL's Image.resize(..., BICUBIC) on an 8-bit RGB image (its Resample.c):
// separable a = -0.5 cubic, support widened by the scale when shrinking
// (antialias), horizontal pass then vertical, each rounded to uint8 with
// 22-bit fixed-point coefficients. Returns the input unchanged when the size
// is already right.
Image resize_bicubic(const Image& image, int64_t out_height, int64_t out_width);

struct PixelValues {
  int64_t rows = 0, cols = 0;  // rows = grid h * grid w, cols = 3 * T * P * P
  std::vector<float> data;     // [rows][cols]
  std::array<int64_t, 3> grid_thw{};
  // Placeholder tokens the image takes in the prompt: t * h * w / merge².
  int64_t num_image_tokens() const;
  // sha256 hex of the resized RGB bytes, their size and every config value
  // that shapes `data`: equal hashes mean equal pixel values (a cache key).
  std::string pixel_hash;
  int64_t merge_size = 2;
};

// smart_resize -> resize_bicubic -> (u8 * rescale - mean) / std in float32
// (fused as (u8 - mean/rescale) / (std/rescale)) -> T identical frames ->
// patches. With do_resize false the image must already be a multiple of
// patch * merge.
PixelValues preprocess_image(const Image& image, const PreprocessorConfig& config);

}  // namespace deltagen
