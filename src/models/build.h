// Building an ONNX model from a checkpoint. Every scenario switch of the
// builder lives in BuildOptions (one struct, like onnxruntime-genai's
// extra_options), so that a CLI flag, a test and a benchmark all say the same.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpoint/checkpoint.h"

namespace deltagen {

struct BuildOptions {
  std::string precision = "fp32";  // fp32 for now; fp16/bf16/int4/int8 come with the builder issue
  // Rows of the rotary cos/sin cache (the longest context the model serves);
  // 0 = config.max_position_embeddings.
  int64_t context_length = 0;
  // Weights go to model.onnx.data when the total exceeds this many bytes
  // (always above 2 GB: protobuf's limit).
  int64_t external_data_threshold = int64_t(1) << 30;
};

// Writes model.onnx (+ model.onnx.data when large), genai_config.json and the
// checkpoint's tokenizer files into out_dir, atomically (all or nothing).
void build_model(const Checkpoint& ckpt, const BuildOptions& opts, const std::filesystem::path& out_dir);

}  // namespace deltagen
