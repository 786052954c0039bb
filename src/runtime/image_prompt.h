// A prompt with images for a --vision model, made ready for the Generator:
// each image decoded, preprocessed as the Hugging Face processor does
// (vision/image_preprocess.h: preprocessor_config_in(the model folder), whose
// cap kMaxImagePixels scales large images down),
// encoded by vision.onnx; its one <|image_pad|> in the ids expanded to the
// image's token count; the 3-D positions of every token computed.
#pragma once
#include <cstdint>
#include <vector>

#include "deltagen/deltagen.h"
#include "runtime/generator.h"
#include "runtime/snapshot.h"

namespace deltagen {

// What an image takes in a prompt, without running the vision model: its
// pad tokens and pixel hash (decoded and preprocessed as prepare_image_prompt
// does). Throws Error naming its origin on a bad image, or when the model
// takes no images.
struct ImageShape {
  int64_t tokens = 0;
  std::string pixel_hash;
};
ImageShape describe_image(const Model& model, const ImageInput& image);

// `ids` with the k-th image-pad id expanded to shapes[k].tokens copies
// (expand_image_pads), and each image's run of pads in the result (start =
// index in ids, with its pixel hash): what snapshots and the prompt cache key
// on. Throws Error when pads and images differ in number.
struct ExpandedPrompt {
  std::vector<int64_t> ids;
  std::vector<SnapshotImage> keys;
};
ExpandedPrompt expand_image_prompt(const std::vector<int64_t>& ids, int64_t image_token_id,
                                   const std::vector<ImageShape>& shapes, const std::string& origin);

struct ImagePrompt {
  std::vector<int64_t> ids;  // expanded
  RowImages images;          // features + positions, for Generator::attach_images
  double encode_seconds = 0;  // preprocessing + the vision model, all images (not its one-time load)
  std::vector<SnapshotImage> keys;  // each image's run of pads in `ids` (expand_image_prompt)
};

// `ids`: the prompt with one image-pad id per image; `start`: the first
// token's rotary position (Generator::next_position). Throws Error naming the
// image's origin on a bad image, or when pads and images differ in number.
ImagePrompt prepare_image_prompt(Model& model, const std::vector<int64_t>& ids, std::span<const ImageInput> images,
                                 int64_t start);

}  // namespace deltagen
