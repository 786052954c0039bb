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
  // 0 = config.max_position_embeddings. Also written as context_length and
  // search.max_length in genai_config.json. Positions must stay below it.
  int64_t context_length = 0;
  // Weights go to model.onnx.data when the total exceeds this many bytes
  // (always above 2 GB: protobuf's limit).
  int64_t external_data_threshold = int64_t(1) << 30;
  // Gated DeltaNet q/k L2 norm: false = one LpNormalization (x / |x|, as
  // onnxruntime-genai since #2127); true = HF's x / sqrt(|x|^2 + 1e-6) exactly,
  // still with one LpNormalization, over x padded with sqrt(1e-6) (+2 nodes per
  // norm). The eps matters only for tiny q/k vectors, e.g. in test checkpoints.
  bool exact_l2norm_eps = false;
  // Progress on stderr while writing weights, only when stderr is a terminal.
  bool show_progress = true;
};

// Throws Error("--precision: ...") etc. for options no build can satisfy, so
// callers can reject them before touching any file.
void validate_build_options(const BuildOptions& opts);

struct BuildReport {
  int64_t node_count = 0;
  int64_t weight_bytes = 0;
  bool external_data = false;  // weights in model.onnx.data
  int64_t context_length = 0;
};

// Writes model.onnx (+ model.onnx.data when large), genai_config.json and the
// checkpoint's tokenizer files into out_dir, atomically (all or nothing).
BuildReport build_model(const Checkpoint& ckpt, const BuildOptions& opts, const std::filesystem::path& out_dir);

}  // namespace deltagen
