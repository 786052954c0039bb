#include "measure/graph_facts.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "graph/model_summary.h"
#include "runtime/genai_config.h"

namespace deltagen::measure {

namespace fs = std::filesystem;

namespace {

// Bits per element of an ONNX tensor data type (0 for strings and unknowns).
int64_t element_bits(int32_t type) {
  switch (type) {
    case onnx::TensorProto::FLOAT: case onnx::TensorProto::INT32: case onnx::TensorProto::UINT32: return 32;
    case onnx::TensorProto::DOUBLE: case onnx::TensorProto::INT64: case onnx::TensorProto::UINT64: return 64;
    case onnx::TensorProto::FLOAT16: case onnx::TensorProto::BFLOAT16:
    case onnx::TensorProto::INT16: case onnx::TensorProto::UINT16: return 16;
    case onnx::TensorProto::INT8: case onnx::TensorProto::UINT8: case onnx::TensorProto::BOOL: return 8;
    default: break;
  }
  // INT4 / UINT4 (IR 10) are not in every onnx release's enum; compare the numbers.
  if (type == 21 || type == 22) return 4;
  return 0;
}

int64_t tensor_bytes(const onnx::TensorProto& t) {
  int64_t count = 1;
  for (int64_t d : t.dims()) count *= d;
  return (count * element_bits(t.data_type()) + 7) / 8;
}

// Whether input `index` of `node` reads only the rows a token selects.
bool row_indexed_input(const onnx::NodeProto& node, int index) {
  const std::string& op = node.op_type();
  if (op == "Gather" || op == "GatherND") return index == 0;
  if (op == "GatherBlockQuantized") return index != 1;  // data, scales, zero points: a row each per token
  if (op == "RotaryEmbedding") return index == 2 || index == 3;        // cos_cache, sin_cache
  if (op == "GroupQueryAttention") return index == 7 || index == 8;    // its own rotary's cos/sin caches
  return false;
}

// The share of a MoE / QMoE node's expert weights one token reads (k / E),
// or 0 when `node` is not one; its expert inputs are every input but the
// activations (0), the router (1) and router_weights (14).
double active_expert_share(const onnx::NodeProto& node, const std::map<std::string, const onnx::TensorProto*>& weights) {
  if (node.domain() != "com.microsoft" && node.domain() != "deltagen") return 0;
  if (node.op_type() != "MoE" && node.op_type() != "QMoE") return 0;
  int64_t k = 1;
  for (const auto& a : node.attribute())
    if (a.name() == "k") k = a.i();
  auto fc1 = node.input_size() > 2 ? weights.find(node.input(2)) : weights.end();
  if (fc1 == weights.end() || fc1->second->dims_size() != 3 || fc1->second->dims(0) <= 0) return 0;
  return std::min(1.0, double(k) / double(fc1->second->dims(0)));
}

bool expert_input(int index) { return index >= 2 && index != 14; }

fs::path resolve(const fs::path& dir_or_file) {
  if (!fs::is_directory(dir_or_file)) return dir_or_file;
  fs::path config = dir_or_file / "genai_config.json";
  if (fs::exists(config)) return dir_or_file / load_genai_config(config).model_filename;
  return dir_or_file / "model.onnx";
}

}  // namespace

GraphFacts graph_facts(const onnx::ModelProto& model, const fs::path& file) {
  GraphFacts f;
  f.model_file = file;
  const auto& g = model.graph();
  f.node_count = g.node_size();
  std::map<std::string, const onnx::TensorProto*> weights;
  for (const auto& t : g.initializer()) weights[t.name()] = &t;
  std::map<std::string, std::vector<std::pair<const onnx::NodeProto*, int>>> uses;
  std::map<std::string, double> expert_share;  // expert weight -> share a token reads
  for (const auto& n : g.node()) {
    ++f.op_counts[graph::qualified_op(n)];
    const double share = active_expert_share(n, weights);
    for (int i = 0; i < n.input_size(); ++i) {
      if (share > 0 && expert_input(i) && !n.input(i).empty()) expert_share[n.input(i)] = share;
      else uses[n.input(i)].push_back({&n, i});
    }
  }
  // Whether every use of `value` reads only rows a token selects: directly,
  // or through a Reshape (the quantized embedding reads its table that way).
  std::function<bool(const std::string&, int)> rows_only = [&](const std::string& value, int depth) {
    auto it = uses.find(value);
    if (it == uses.end() || depth > 2) return false;
    for (const auto& [node, index] : it->second) {
      if (row_indexed_input(*node, index)) continue;
      if (node->op_type() == "Reshape" && index == 0 && node->output_size() == 1 &&
          rows_only(node->output(0), depth + 1))
        continue;
      return false;
    }
    return true;
  };
  std::set<std::string> full_read, row_read;
  for (const auto& [value, readers] : uses) (rows_only(value, 0) ? row_read : full_read).insert(value);
  for (const auto& t : g.initializer()) {
    const int64_t bytes = tensor_bytes(t);
    f.weight_bytes += bytes;
    if (row_read.count(t.name()) && !full_read.count(t.name())) f.row_indexed_bytes += bytes;
    auto share = expert_share.find(t.name());
    if (share != expert_share.end() && !full_read.count(t.name())) {
      f.expert_bytes += bytes;
      f.active_expert_bytes += int64_t(double(bytes) * share->second);
    }
  }
  return f;
}

std::string model_label(const fs::path& dir) {
  fs::path p = dir;
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

std::string kernel_set_label(KernelSet kernels) {
  switch (kernels) {
    case KernelSet::Ort: return " (ort kernels)";
    case KernelSet::DeltagenOps: return " (deltagen-ops kernels)";
    case KernelSet::Deltagen: break;
  }
  return "";
}

GraphFacts graph_facts(const fs::path& dir_or_file) {
  const fs::path file = resolve(dir_or_file);
  return graph_facts(graph::load_model_proto(file), file);
}

nlohmann::json to_json(const GraphFacts& f) {
  return {{"model_file", f.model_file.string()},
          {"node_count", f.node_count},
          {"op_counts", f.op_counts},
          {"weight_bytes", f.weight_bytes},
          {"row_indexed_bytes", f.row_indexed_bytes},
          {"expert_bytes", f.expert_bytes},
          {"active_expert_bytes", f.active_expert_bytes},
          {"decode_read_bytes", f.decode_read_bytes()}};
}

}  // namespace deltagen::measure
