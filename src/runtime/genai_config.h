// The few genai_config.json settings the generation loop needs. The file is
// written by the builder in onnxruntime-genai's layout:
//   {"model": {"context_length", "eos_token_id", "vocab_size",
//              "decoder": {"filename", ...}, ...}, "search": {...}}
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "deltagen/options.h"

namespace deltagen {

struct GenaiConfig {
  std::string model_filename = "model.onnx";  // model.decoder.filename
  int64_t context_length = 0;                  // longest sequence the model serves; 0 = unknown
  int64_t vocab_size = 0;                      // 0 = unknown
  std::vector<int64_t> eos_token_ids;          // eos_token_id may be a number or a list
  // "search": how the checkpoint recommends sampling (its generation_config.json,
  // written there by `deltagen build`). do_sample false (or no section) = greedy.
  SamplingOptions sampling;
  // model.decoder.session_options.provider_options: the first provider the
  // model was built for (`build --target`); none = the CPU.
  std::optional<ExecutionProvider> provider;

  // A --vision build (onnxruntime-genai's VL layout): model.vision.filename,
  // model.embedding.filename, the image placeholder id and the merge size.
  // Empty file names: a text model.
  std::string vision_filename, embedding_filename;
  int64_t image_token_id = -1;
  int64_t vision_start_token_id = -1, vision_end_token_id = -1;
  int64_t spatial_merge_size = 2;
  bool has_vision() const { return !vision_filename.empty(); }

  // A build with the checkpoint's multi-token-prediction head:
  // model.mtp.filename (mtp.onnx, docs/speculative.md). Empty: no head.
  std::string mtp_filename;
  bool has_mtp() const { return !mtp_filename.empty(); }
};

// Throws Error naming the file on a missing file, bad JSON or a wrongly typed key.
GenaiConfig load_genai_config(const std::filesystem::path& genai_config_json);

}  // namespace deltagen
