// A checkpoint's generation_config.json: how its authors recommend sampling
// (Qwen3.5: do_sample with temperature, top_p, top_k) and every id that ends
// generation (it may list more EOS ids than config.json). `deltagen build`
// writes these into genai_config.json ("search" and model.eos_token_id), as
// onnxruntime-genai's builder does, so chats and the server start from them.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace deltagen {

struct GenerationDefaults {
  bool do_sample = false;
  std::optional<double> temperature, top_p, min_p, repetition_penalty, presence_penalty;
  std::optional<int64_t> top_k;
  std::vector<int64_t> eos_token_ids;
};

// nullopt when the folder has no generation_config.json; Error naming the
// file when it is malformed or a value is out of range.
std::optional<GenerationDefaults> read_generation_config(const std::filesystem::path& checkpoint_dir);

}  // namespace deltagen
