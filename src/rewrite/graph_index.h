// Pattern matching over an ONNX graph for the load-time fusions
// (gated_delta_fusion.h, swiglu_fusion.h): who produces each value, who reads
// it, and the small int64 constants (Split sizes, Reshape shapes).
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

namespace deltagen::rewrite::fusion {

inline constexpr const char* kMs = "com.microsoft";

inline const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

inline int64_t int_or(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  const auto* a = find_attribute(node, name);
  return a ? a->i() : fallback;
}

// Attributes a fusion sets on the node it writes.
inline void set_int_attribute(onnx::NodeProto& node, const std::string& name, int64_t value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto_AttributeType_INT);
  a->set_i(value);
}
inline void set_float_attribute(onnx::NodeProto& node, const std::string& name, float value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto_AttributeType_FLOAT);
  a->set_f(value);
}
inline void set_ints_attribute(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& values) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto_AttributeType_INTS);
  for (int64_t v : values) a->add_ints(v);
}

inline std::string input(const onnx::NodeProto& node, int i) { return i < node.input_size() ? node.input(i) : std::string(); }
inline std::string output(const onnx::NodeProto& node, int i) {
  return i < node.output_size() ? node.output(i) : std::string();
}

inline std::optional<std::vector<int64_t>> int64_values(const onnx::TensorProto& t) {
  if (t.data_type() != onnx::TensorProto_DataType_INT64 || t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
    return std::nullopt;
  std::vector<int64_t> v(t.int64_data().begin(), t.int64_data().end());
  if (v.empty() && !t.raw_data().empty()) {
    v.resize(t.raw_data().size() / sizeof(int64_t));
    std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(int64_t));
  }
  return v;
}

// Where each value comes from and how often it is read, for one graph.
class GraphIndex {
 public:
  explicit GraphIndex(const onnx::GraphProto& graph) : graph_(graph) {
    for (int n = 0; n < graph.node_size(); ++n) {
      const auto& node = graph.node(n);
      for (int o = 0; o < node.output_size(); ++o) producer_[node.output(o)] = {n, o};
      for (const auto& in : node.input())
        if (!in.empty()) {
          ++uses_[in];
          reader_[in] = n;
        }
    }
    for (const auto& out : graph.output()) ++uses_[out.name()];  // a graph output is never private
    for (const auto& t : graph.initializer()) initializer_[t.name()] = &t;
    for (const auto& in : graph.input())
      if (in.type().has_tensor_type()) input_type_[in.name()] = in.type().tensor_type().elem_type();
  }

  // The node computing `value` as its output `index`, when it has that op type and domain.
  const onnx::NodeProto* producer(const std::string& value, const char* op, const char* domain, int index = 0,
                                  int* node_index = nullptr) const {
    auto it = producer_.find(value);
    if (it == producer_.end() || it->second.second != index) return nullptr;
    const auto& node = graph_.node(it->second.first);
    if (node.op_type() != op || node.domain() != domain) return nullptr;
    if (node_index) *node_index = it->second.first;
    return &node;
  }
  // The one node reading a private value (see private_value).
  const onnx::NodeProto* reader(const std::string& value, const char* op, const char* domain,
                                int* node_index) const {
    // (A graph output nothing reads also counts one use: it has no reader.)
    auto it = reader_.find(value);
    if (!private_value(value) || it == reader_.end()) return nullptr;
    const int n = it->second;
    const auto& node = graph_.node(n);
    if (node.op_type() != op || node.domain() != domain) return nullptr;
    *node_index = n;
    return &node;
  }

  // How many node inputs (and graph outputs) read `value`.
  int uses(const std::string& value) const {
    auto it = uses_.find(value);
    return it == uses_.end() ? 0 : it->second;
  }

  // Read by exactly one node and not a graph output: safe to fold away.
  bool private_value(const std::string& value) const {
    auto it = uses_.find(value);
    return it != uses_.end() && it->second == 1;
  }

  // The int64 values of a Constant node's output or of an initializer.
  std::optional<std::vector<int64_t>> constant_ints(const std::string& value) const {
    if (const auto* c = producer(value, "Constant", ""))
      if (const auto* a = find_attribute(*c, "value")) return int64_values(a->t());
    auto it = initializer_.find(value);
    if (it != initializer_.end()) return int64_values(*it->second);
    return std::nullopt;
  }
  const onnx::TensorProto* initializer(const std::string& value) const {
    auto it = initializer_.find(value);
    return it == initializer_.end() ? nullptr : it->second;
  }
  // The element type of a graph input (onnx::TensorProto_DataType), 0 for any other value.
  int graph_input_type(const std::string& value) const {
    auto it = input_type_.find(value);
    return it == input_type_.end() ? 0 : it->second;
  }

 private:
  const onnx::GraphProto& graph_;
  std::unordered_map<std::string, std::pair<int, int>> producer_;
  std::unordered_map<std::string, int> uses_;
  std::unordered_map<std::string, int> reader_;  // the last node reading each value
  std::unordered_map<std::string, const onnx::TensorProto*> initializer_;
  std::unordered_map<std::string, int> input_type_;
};

// Drops every match that shares a node with an earlier one: in a graph where
// two nodes produce one value (not valid ONNX, but a file can say so) two
// chains can overlap (model_rewrite_fuzz). `nodes` lists a match's node indices.
template <typename Match>
void keep_disjoint(std::vector<Match>& matches, std::vector<int> Match::*nodes) {
  std::vector<bool> taken;
  std::erase_if(matches, [&](const Match& m) {
    for (int n : m.*nodes)
      if (n < int(taken.size()) && taken[size_t(n)]) return true;
    for (int n : m.*nodes) {
      if (n >= int(taken.size())) taken.resize(size_t(n) + 1, false);
      taken[size_t(n)] = true;
    }
    return false;
  });
}

// The disjoint matches of `match(index, node, n)` over the nodes of one op type and domain.
template <typename Match, typename MatchFn>
std::vector<Match> find_matches(const onnx::GraphProto& graph, const char* op, const char* domain, MatchFn match,
                                std::vector<int> Match::*nodes) {
  std::vector<Match> matches;
  const GraphIndex index(graph);
  for (int n = 0; n < graph.node_size(); ++n) {
    const auto& node = graph.node(n);
    if (node.op_type() != op || node.domain() != domain) continue;
    if (std::optional<Match> m = match(index, node, n)) matches.push_back(std::move(*m));
  }
  keep_disjoint(matches, nodes);
  return matches;
}

// Rebuilds the node list: nodes in `drop` go, except that each index in
// `replace` becomes its replacement node (in the same place), then Constant
// nodes nothing reads any more go too (ORT would warn about each), and the
// list is put back in a (stable) topological order.
void edit_nodes(onnx::GraphProto& graph, const std::vector<int>& drop,
                const std::unordered_map<int, const onnx::NodeProto*>& replace);

}  // namespace deltagen::rewrite::fusion
