// Writes a graph plus its weights as model.onnx, with the weights either
// inline (raw_data) or in one external-data file "model.onnx.data" next to it,
// every tensor starting at a page-aligned offset so ONNX Runtime can map it.
// Both files are written under temp names and renamed into place.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "graph/graph_builder.h"

namespace deltagen::graph {

struct Opset {
  std::string domain;  // "" = ai.onnx
  int64_t version = 0;
};

// The ModelProto around a finished graph (no initializers yet: the writer adds them).
onnx::ModelProto make_model(const GraphBuilder& builder, const std::vector<Opset>& opsets,
                            int64_t ir_version, const std::string& producer);

struct WriteOptions {
  // Weights go to the external-data file when their total exceeds this;
  // above ~2 GB always (protobuf cannot hold more in one message).
  int64_t external_data_threshold = int64_t(1) << 30;
  int64_t alignment = 4096;  // offset alignment inside the data file
  // Called after each weight is written: (bytes done, bytes total).
  std::function<void(int64_t, int64_t)> progress;
};

struct WriteResult {
  bool external = false;
  int64_t weight_bytes = 0;  // sum of all initializer sizes
  std::filesystem::path data_file;  // empty when inline
};

// The external-data file name used for `model_path` ("model.onnx.data").
std::string data_file_name(const std::filesystem::path& model_path);

// Consumes `weights` (each producer is called once, in order). Throws Error on I/O failure.
WriteResult write_model(onnx::ModelProto model, std::vector<Initializer> weights,
                        const std::filesystem::path& model_path, const WriteOptions& opts);

}  // namespace deltagen::graph
