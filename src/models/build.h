// Building an ONNX model from a checkpoint. The switches are in
// build_options.h (one struct for the CLI, tests and benchmarks).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpoint/checkpoint.h"
#include "models/build_options.h"

namespace deltagen {

struct BuildReport {
  int64_t node_count = 0;
  int64_t weight_bytes = 0;
  bool external_data = false;  // weights in model.onnx.data
  int64_t context_length = 0;
};

// Writes model.onnx (+ model.onnx.data when large), genai_config.json and the
// checkpoint's tokenizer files into out_dir, atomically (all or nothing).
// The same checkpoint and options always give the same bytes.
BuildReport build_model(const Checkpoint& ckpt, const BuildOptions& opts, const std::filesystem::path& out_dir);

}  // namespace deltagen
