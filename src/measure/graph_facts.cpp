#include "measure/graph_facts.h"

#include <algorithm>
#include <cmath>
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

int64_t int_attribute(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return a.i();
  return fallback;
}

// How input `index` of `node` holds weights: the bits of one weight for a
// block-quantized code tensor, 0 for its scales and zero points (overhead, no
// weights of their own), -1 for a plain tensor (one weight per element).
int code_bits(const onnx::NodeProto& node, int index) {
  const std::string& op = node.op_type();
  if (op == "MatMulNBits") return index == 1 ? int(int_attribute(node, "bits", 4)) : index <= 3 ? 0 : -1;
  if (op == "GatherBlockQuantized") return index == 0 ? int(int_attribute(node, "bits", 4)) : index == 1 ? -1 : 0;
  if (op == "QMoE") {
    if (index == 2 || index == 5 || index == 8) return int(int_attribute(node, "expert_weight_bits", 4));
    return (index == 3 || index == 6 || index == 9 || (index >= 11 && index <= 13)) ? 0 : -1;
  }
  return -1;
}

bool position_table_input(const onnx::NodeProto& node, int index) {
  return (node.op_type() == "RotaryEmbedding" && (index == 2 || index == 3)) ||
         (node.op_type() == "GroupQueryAttention" && (index == 7 || index == 8));
}

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
  // The first reader of a value that says how it holds weights (through a
  // Reshape: the quantized embedding's codes), and whether it is a position table.
  std::function<int(const std::string&, int)> bits_of = [&](const std::string& value, int depth) {
    auto it = uses.find(value);
    if (it == uses.end() || depth > 2) return -1;
    for (const auto& [node, index] : it->second) {
      if (node->op_type() == "Reshape" && index == 0 && node->output_size() == 1) {
        const int b = bits_of(node->output(0), depth + 1);
        if (b >= 0) return b;
      }
      const int b = code_bits(*node, index);
      if (b >= 0) return b;
    }
    return -1;
  };
  std::map<std::string, int> expert_code_bits;  // the QMoE inputs left out of `uses` above
  for (const auto& n : g.node())
    if (active_expert_share(n, weights) > 0)
      for (int i = 0; i < n.input_size(); ++i)
        if (expert_input(i) && !n.input(i).empty()) expert_code_bits[n.input(i)] = code_bits(n, i);
  auto is_position_table = [&](const std::string& value) {
    auto it = uses.find(value);
    if (it == uses.end()) return false;
    for (const auto& [node, index] : it->second)
      if (!position_table_input(*node, index)) return false;
    return true;
  };
  for (const auto& t : g.initializer()) {
    const int64_t bytes = tensor_bytes(t);
    f.weight_bytes += bytes;
    if (row_read.count(t.name()) && !full_read.count(t.name())) f.row_indexed_bytes += bytes;
    auto share = expert_share.find(t.name());
    const bool expert = share != expert_share.end() && !full_read.count(t.name());
    if (expert) {
      f.expert_bytes += bytes;
      f.active_expert_bytes += int64_t(double(bytes) * share->second);
    }

    if (is_position_table(t.name())) continue;
    auto eb = expert_code_bits.find(t.name());
    const int bits = expert ? (eb == expert_code_bits.end() ? -1 : eb->second) : bits_of(t.name(), 0);
    // Integer constants (shapes, axes, indices) hold no weights.
    const bool float_tensor = t.data_type() == onnx::TensorProto::FLOAT ||
                              t.data_type() == onnx::TensorProto::FLOAT16 ||
                              t.data_type() == onnx::TensorProto::BFLOAT16;
    if (bits < 0 && !float_tensor) continue;
    double elements = 1;
    for (int64_t d : t.dims()) elements *= double(d);
    const double weights = bits < 0 ? elements : bits == 0 ? 0.0 : double(bytes) * 8.0 / bits;
    f.stored.weights += weights;
    f.stored.bytes += double(bytes);
    // The share of the tensor one token reads.
    double read = 1;
    if (expert) read = share->second;
    else if (row_read.count(t.name()) && !full_read.count(t.name()) && t.dims_size() > 0 && t.dims(0) > 0)
      read = 1.0 / double(t.dims(0));
    f.read_per_token.weights += weights * read;
    f.read_per_token.bytes += double(bytes) * read;
  }
  return f;
}

nlohmann::json weight_counts_json(const GraphFacts& f) {
  auto count = [](const WeightCount& c) {
    return nlohmann::json{{"weights", int64_t(std::llround(c.weights))},
                          {"bytes", int64_t(std::llround(c.bytes))},
                          {"bits_per_weight", c.bits_per_weight()}};
  };
  return {{"file", count(f.stored)}, {"read_per_token", count(f.read_per_token)}};
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
