#include "runtime/image_prompt.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>

#include "vision/image_decode.h"
#include "vision/image_preprocess.h"

namespace deltagen {
namespace fs = std::filesystem;

ImageInput ImageInput::from_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file.string(), "cannot open the image");
  ImageInput image;
  image.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  image.origin = file.string();
  return image;
}

namespace {

void require_vision(const Model& model) {
  if (!model.has_vision())
    fail(model.dir().string(), "this model takes no images: build it with --vision from a checkpoint with a vision tower");
}

}  // namespace

ImageShape describe_image(const Model& model, const ImageInput& image) {
  require_vision(model);
  const PixelValues pv =
      preprocess_image(decode_image_bytes(image.bytes, image.origin), preprocessor_config_in(model.dir()));
  return {pv.num_image_tokens(), pv.pixel_hash};
}

ExpandedPrompt expand_image_prompt(const std::vector<int64_t>& ids, int64_t image_token_id,
                                   const std::vector<ImageShape>& shapes, const std::string& origin) {
  std::vector<int64_t> tokens_per_image;
  for (const ImageShape& shape : shapes) tokens_per_image.push_back(shape.tokens);
  ExpandedPrompt out;
  out.ids = expand_image_pads(ids, image_token_id, tokens_per_image, origin);
  for (size_t i = 0, k = 0; i < out.ids.size() && k < shapes.size(); ++i) {
    if (out.ids[i] != image_token_id) continue;
    out.keys.push_back({int64_t(i), shapes[k].tokens, shapes[k].pixel_hash});
    i += size_t(shapes[k++].tokens) - 1;
  }
  return out;
}

ImagePrompt prepare_image_prompt(Model& model, const std::vector<int64_t>& ids, std::span<const ImageInput> images,
                                 int64_t start) {
  require_vision(model);
  const GenaiConfig& cfg = model.config();
  const fs::path preprocessor = model.dir() / "preprocessor_config.json";
  const PreprocessorConfig pre = preprocessor_config_in(model.dir());
  model.vision_session();  // loaded once, before the clock: encode_seconds is per request

  const auto begin = std::chrono::steady_clock::now();
  ImagePrompt out;
  std::vector<ImageShape> shapes;
  std::vector<ImageGrid> grids;
  for (const ImageInput& input : images) {
    const PixelValues pv = preprocess_image(decode_image_bytes(input.bytes, input.origin), pre);
    if (pv.merge_size != cfg.spatial_merge_size)
      fail(preprocessor.string(), "merge_size " + std::to_string(pv.merge_size) + " differs from the model's " +
                                      std::to_string(cfg.spatial_merge_size));
    std::vector<float> features = model.encode_image(pv.data.data(), pv.rows, pv.cols, pv.grid_thw);
    out.images.features.insert(out.images.features.end(), features.begin(), features.end());
    out.images.rows += pv.num_image_tokens();
    shapes.push_back({pv.num_image_tokens(), pv.pixel_hash});
    grids.push_back({pv.grid_thw[0], pv.grid_thw[1], pv.grid_thw[2]});
  }
  out.encode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ExpandedPrompt expanded = expand_image_prompt(ids, cfg.image_token_id, shapes, "prompt");
  out.ids = std::move(expanded.ids);
  out.keys = std::move(expanded.keys);
  out.images.positions = mrope_positions(out.ids, cfg.image_token_id, grids, cfg.spatial_merge_size, start);
  return out;
}

}  // namespace deltagen
