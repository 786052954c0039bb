#include "graph/model_summary.h"

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "graph/graph_builder.h"
#include "deltagen/error.h"

namespace deltagen::graph {
namespace fs = std::filesystem;

namespace {

fs::path resolve_model_file(const fs::path& file_or_dir) {
  if (fs::is_directory(file_or_dir)) {
    fs::path f = file_or_dir / "model.onnx";
    if (!fs::exists(f)) fail(file_or_dir.string(), "folder has no model.onnx");
    return f;
  }
  if (!fs::exists(file_or_dir)) fail(file_or_dir.string(), "no such file or folder");
  return file_or_dir;
}

TensorSummary summarize_value(const onnx::ValueInfoProto& vi) {
  TensorSummary t;
  t.name = vi.name();
  const auto& tt = vi.type().tensor_type();
  t.dtype = dtype_name(tt.elem_type());
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value())
      t.shape.push_back(std::to_string(d.dim_value()));
    else if (!d.dim_param().empty())
      t.shape.push_back(d.dim_param());
    else
      t.shape.push_back("?");
  }
  return t;
}

std::string external_value(const onnx::TensorProto& t, const std::string& key) {
  for (const auto& e : t.external_data())
    if (e.key() == key) return e.value();
  return "";
}

int64_t parse_count(const std::string& text, const std::string& what, const fs::path& file) {
  if (text.empty()) return 0;
  try {
    size_t pos = 0;
    long long v = std::stoll(text, &pos);
    if (pos != text.size() || v < 0) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    fail(file.string(), "bad external-data " + what + " '" + text + "'");
  }
}

// total += n, refusing sums that do not fit (the numbers come from the file).
void add_bytes(int64_t& total, int64_t n, const fs::path& file) {
  if (__builtin_add_overflow(total, n, &total)) fail(file.string(), "initializer byte counts overflow 64 bits");
}

int64_t inline_tensor_bytes(const onnx::TensorProto& t, const fs::path& file) {
  if (t.has_raw_data()) return int64_t(t.raw_data().size());
  // Typed fields: dims x element size. The dims are the file's word, so the
  // product is checked (and kept below 2^56, room for 8-byte elements).
  int64_t numel = 1;
  for (int64_t d : t.dims())
    if (d < 0 || __builtin_mul_overflow(numel, d, &numel) || numel > (int64_t(1) << 56))
      fail(file.string(), "initializer '" + t.name() + "' has impossible dimensions");
  try {
    return tensor_nbytes(DataType(t.data_type()), numel);
  } catch (const std::exception&) {
    return 0;  // string tensors etc.: not weights
  }
}

// Adds up initializer bytes and checks each external range lies inside its file.
void account_initializers(const onnx::GraphProto& g, const fs::path& model_file, ModelSummary& s) {
  std::map<std::string, int64_t> needed;  // data file -> bytes it must have
  for (const auto& t : g.initializer()) {
    ++s.initializer_count;
    if (t.data_location() != onnx::TensorProto_DataLocation_EXTERNAL) {
      add_bytes(s.inline_bytes, inline_tensor_bytes(t, model_file), model_file);
      continue;
    }
    std::string location = external_value(t, "location");
    if (location.empty()) fail(model_file.string(), "initializer '" + t.name() + "' has no external-data location");
    int64_t offset = parse_count(external_value(t, "offset"), "offset", model_file);
    int64_t length = parse_count(external_value(t, "length"), "length", model_file);
    add_bytes(s.external_bytes, length, model_file);
    int64_t range_end = offset;
    add_bytes(range_end, length, model_file);
    int64_t& end = needed[location];
    end = std::max(end, range_end);
  }
  for (const auto& [location, end] : needed) {
    fs::path data = model_file.parent_path() / location;
    std::error_code ec;
    auto size = fs::file_size(data, ec);
    if (ec) fail(data.string(), "external-data file of " + model_file.filename().string() + " is missing");
    if (int64_t(size) < end)
      fail(data.string(), "external-data file is too short (" + std::to_string(size) + " bytes, needs " +
                              std::to_string(end) + ")");
    s.data_files.push_back(location);
  }
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += v[i];
  }
  return out;
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

nlohmann::json tensors_json(const std::vector<TensorSummary>& ts) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& t : ts) arr.push_back({{"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}});
  return arr;
}

}  // namespace

std::string qualified_op(const onnx::NodeProto& node) {
  const std::string& d = node.domain();
  if (d.empty() || d == "ai.onnx") return node.op_type();
  return d + "." + node.op_type();
}

onnx::ModelProto load_model_proto(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file.string(), "cannot open file");
  onnx::ModelProto model;
  // protobuf is lenient enough to accept some garbage, so also demand the
  // fields every real model has.
  if (!model.ParseFromIstream(&in) || !model.has_graph() || model.ir_version() <= 0 ||
      model.opset_import_size() == 0)
    fail(file.string(), "not a valid ONNX model");
  return model;
}

ModelSummary summarize(const onnx::ModelProto& model, const fs::path& file) {
  ModelSummary s;
  s.file = file;
  s.ir_version = model.ir_version();
  for (const auto& o : model.opset_import()) s.opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();
  const auto& g = model.graph();
  s.node_count = g.node_size();
  for (const auto& n : g.node()) ++s.op_counts[qualified_op(n)];
  for (const auto& vi : g.input()) s.inputs.push_back(summarize_value(vi));
  for (const auto& vi : g.output()) s.outputs.push_back(summarize_value(vi));
  account_initializers(g, file, s);
  return s;
}

ModelSummary summarize_model(const fs::path& file_or_dir) {
  fs::path file = resolve_model_file(file_or_dir);
  return summarize(load_model_proto(file), file);
}

std::string summary_text(const ModelSummary& s) {
  std::string out = "model: " + s.file.string() + "\n";
  out += "ir_version: " + std::to_string(s.ir_version) + "\nopsets:";
  for (const auto& [domain, version] : s.opsets)
    out += " " + (domain.empty() ? std::string("ai.onnx") : domain) + "=" + std::to_string(version);
  out += "\nnodes: " + std::to_string(s.node_count) + "\n";
  for (const auto& [op, count] : s.op_counts) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-48s %" PRId64 "\n", op.c_str(), count);
    out += line;
  }
  auto list = [&](const char* title, const std::vector<TensorSummary>& ts) {
    out += std::string(title) + ": " + std::to_string(ts.size()) + "\n";
    for (const auto& t : ts) out += "  " + t.name + " " + t.dtype + " [" + join(t.shape) + "]\n";
  };
  list("inputs", s.inputs);
  list("outputs", s.outputs);
  out += "initializers: " + std::to_string(s.initializer_count) + "\n";
  out += "weight bytes: " + with_commas(s.weight_bytes()) + " (external " + with_commas(s.external_bytes) +
         ", inline " + with_commas(s.inline_bytes) + ")\n";
  if (!s.data_files.empty()) out += "data files: " + join(s.data_files) + "\n";
  return out;
}

nlohmann::json summary_json(const ModelSummary& s) {
  nlohmann::json opsets = nlohmann::json::object();
  for (const auto& [domain, version] : s.opsets) opsets[domain.empty() ? "ai.onnx" : domain] = version;
  return {
      {"file", s.file.string()},
      {"ir_version", s.ir_version},
      {"opsets", opsets},
      {"nodes", s.node_count},
      {"op_counts", s.op_counts},
      {"inputs", tensors_json(s.inputs)},
      {"outputs", tensors_json(s.outputs)},
      {"initializers", s.initializer_count},
      {"weight_bytes", {{"total", s.weight_bytes()}, {"external", s.external_bytes}, {"inline", s.inline_bytes}}},
      {"data_files", s.data_files},
  };
}

}  // namespace deltagen::graph
