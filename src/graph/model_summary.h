// What `deltagen inspect` reports about an ONNX model: node counts per op
// type, graph I/O with dtypes and shapes, and where the weights live.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include <onnx/onnx_pb.h>

namespace deltagen::graph {

struct TensorSummary {
  std::string name;
  std::string dtype;               // "float32", "int64", ...
  std::vector<std::string> shape;  // "64" or "batch_size"; "?" when unknown
};

struct ModelSummary {
  std::filesystem::path file;
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;    // "" -> ai.onnx
  int64_t node_count = 0;
  std::map<std::string, int64_t> op_counts; // "MatMul", "com.microsoft.LinearAttention"
  std::vector<TensorSummary> inputs, outputs;
  int64_t initializer_count = 0;
  int64_t external_bytes = 0;  // initializer bytes in external-data files
  int64_t inline_bytes = 0;    // initializer bytes inside the .onnx file
  std::vector<std::string> data_files;  // external-data files referenced

  int64_t weight_bytes() const { return external_bytes + inline_bytes; }
};

// Reads an .onnx file (a folder means its model.onnx). Throws Error naming
// the file when it is missing, not an ONNX model, or its external data is
// missing or too short.
onnx::ModelProto load_model_proto(const std::filesystem::path& file);
ModelSummary summarize_model(const std::filesystem::path& file_or_dir);
ModelSummary summarize(const onnx::ModelProto& model, const std::filesystem::path& file);

// "MatMul" or "com.microsoft.LinearAttention": the domain-qualified op name.
std::string qualified_op(const onnx::NodeProto& node);

std::string summary_text(const ModelSummary& s);
nlohmann::json summary_json(const ModelSummary& s);

}  // namespace deltagen::graph
