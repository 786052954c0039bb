// deltagen reference --checkpoint DIR --ids 5,17,300 [--max-new-tokens N]
//                    [--logits-out F.npy] [--json]
//
// Runs the float64 reference forward pass: prefills the prompt ids, then
// greedy-decodes N tokens one at a time (EOS is not special) and prints the
// continuation as space-separated ids, or with --json as
// {"prompt_ids":[...],"generated_ids":[...]}. --logits-out writes the f32
// logits [P + N - 1, vocab]: the P prompt rows, then one row per decode step
// (with N = 0 only the P prompt rows).
// --image FILE (repeatable; a checkpoint with a vision tower): each image is
// preprocessed as the Hugging Face processor does (the checkpoint's
// preprocessor_config.json), run through the float64 vision tower and put
// where --ids holds one image-pad id (config.json's image_token_id), expanded
// to the image's token count; --logits-out and prompt_ids cover the expanded
// prompt.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "reference/qwen35_reference.h"
#include "reference/qwen35_vision_reference.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"
#include "vision/mrope_positions.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "deltagen/error.h"
#include "util/npy.h"

namespace deltagen {

int cmd_reference(int argc, char** argv) {
  Args args(argc, argv, {"json"});
  const std::string checkpoint_dir = args.require("checkpoint");
  const std::string ids_text = args.require("ids");
  const int64_t new_tokens = args.get_int("max-new-tokens", 16);
  const auto logits_out = args.get("logits-out");
  const bool json = args.flag("json");
  const std::vector<std::string> image_files = args.get_all("image");
  args.finish();

  std::vector<int64_t> prompt = parse_ids(ids_text, "--ids");
  if (prompt.empty()) fail("--ids", "empty prompt");
  if (new_tokens < 0) fail("--max-new-tokens", "must be >= 0, got " + std::to_string(new_tokens));
  // Fail before the (possibly long) forward pass rather than after it.
  if (logits_out) {
    const std::filesystem::path parent = std::filesystem::path(*logits_out).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent))
      fail(*logits_out, "folder " + parent.string() + " does not exist");
  }

  auto ckpt = Checkpoint::open(checkpoint_dir);
  const ModelConfig& cfg = ckpt->config();
  for (int64_t id : prompt)
    if (id >= cfg.vocab_size)
      fail("--ids", "token id " + std::to_string(id) + " is not below vocab_size " + std::to_string(cfg.vocab_size));
  // Every prompt and generated token takes a position (the last generated
  // one is never fed back, but a runtime would cache it next).
  const int64_t total = int64_t(prompt.size()) + new_tokens;
  if (cfg.max_position_embeddings > 0 && total > cfg.max_position_embeddings)
    fail(int64_t(prompt.size()) > cfg.max_position_embeddings ? "--ids" : "--max-new-tokens",
         "prompt longer than the context: " + std::to_string(prompt.size()) + " prompt + " +
             std::to_string(new_tokens) + " new tokens exceed max_position_embeddings " +
             std::to_string(cfg.max_position_embeddings));

  ReferenceModel model(*ckpt);
  GreedyResult r;
  if (image_files.empty()) {
    r = reference_greedy(model, prompt, new_tokens);
  } else {
    if (!ckpt->has_vision()) fail("--image", checkpoint_dir + " has no vision tower");
    const PreprocessorConfig pre = preprocessor_config_in(ckpt->dir());  // as the runtime preprocesses
    VisionReference vision(*ckpt);
    std::vector<ImageGrid> grids;
    std::vector<int64_t> tokens_per_image;
    Matrix64 features(0, cfg.hidden_size);
    for (const std::string& file : image_files) {
      const PixelValues pv = preprocess_image(decode_image(file), pre);
      Matrix64 pixels(pv.rows, pv.cols);
      std::copy(pv.data.begin(), pv.data.end(), pixels.data.begin());
      const ImageGrid grid{pv.grid_thw[0], pv.grid_thw[1], pv.grid_thw[2]};
      Matrix64 f = vision.encode(pixels, {grid});
      features.data.insert(features.data.end(), f.data.begin(), f.data.end());
      features.rows += f.rows;
      grids.push_back(grid);
      tokens_per_image.push_back(pv.num_image_tokens());
    }
    prompt = expand_image_pads(prompt, cfg.image_token_id, tokens_per_image, "--ids");
    r = reference_greedy_with_images(model, prompt, features, grids, new_tokens);
  }

  // Write the file before printing, so that a failed write leaves no
  // half-reported run (write_npy_f32 itself is atomic).
  if (logits_out) {
    std::vector<float> f32(r.logits.data.begin(), r.logits.data.end());
    write_npy_f32(*logits_out, f32.data(), {r.logits.rows, r.logits.cols});
  }

  if (json) {
    nlohmann::json j = {{"prompt_ids", prompt}, {"generated_ids", r.generated}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < r.generated.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(r.generated[i]);
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace deltagen
