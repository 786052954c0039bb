#include "rewrite/weight_reshapes.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace deltagen::rewrite {
namespace {

bool external(const onnx::TensorProto& t) { return t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL; }

// The int64 values of a 1-D shape tensor stored in the proto itself.
std::optional<std::vector<int64_t>> shape_values(const onnx::TensorProto& t) {
  if (t.data_type() != onnx::TensorProto_DataType_INT64 || t.dims_size() != 1 || external(t)) return std::nullopt;
  std::vector<int64_t> v(t.int64_data().begin(), t.int64_data().end());
  if (v.empty() && t.has_raw_data() && t.raw_data().size() == size_t(t.dims(0)) * 8) {
    v.resize(size_t(t.dims(0)));
    std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
  }
  if (int64_t(v.size()) != t.dims(0)) return std::nullopt;
  return v;
}

// Reshape's target dims resolved against `from` (one -1 at most, 0 = copy
// the input's dim, as allowzero = 0 says); nullopt when they do not fit.
std::optional<std::vector<int64_t>> resolve(const std::vector<int64_t>& shape, const std::vector<int64_t>& from) {
  int64_t total = 1, known = 1, infer = -1;
  for (int64_t d : from) total *= d;
  std::vector<int64_t> out = shape;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) {
      if (i >= from.size()) return std::nullopt;
      out[i] = from[i];
    }
    if (out[i] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = int64_t(i);
      continue;
    }
    if (out[i] <= 0) return std::nullopt;
    known *= out[i];
  }
  if (infer >= 0) {
    if (known == 0 || total % known != 0) return std::nullopt;
    out[size_t(infer)] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return out;
}

}  // namespace

int64_t alias_reshaped_weights(onnx::GraphProto& graph) {
  // A subgraph (If, Loop, Scan) may read a weight by name from outside: leave such graphs alone.
  for (const auto& n : graph.node())
    for (const auto& a : n.attribute())
      if (a.has_g() || a.graphs_size() > 0) return 0;
  std::map<std::string, const onnx::TensorProto*> weights, constants;
  for (const auto& t : graph.initializer()) weights[t.name()] = &t;
  for (const auto& in : graph.input()) weights.erase(in.name());  // overridable at run time
  for (const auto& n : graph.node())
    if (n.op_type() == "Constant" && n.domain().empty() && n.attribute_size() == 1 && n.attribute(0).name() == "value")
      constants[n.output(0)] = &n.attribute(0).t();
  std::set<std::string> outputs;
  for (const auto& o : graph.output()) outputs.insert(o.name());

  std::vector<onnx::TensorProto> aliases;
  std::set<int> removed;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& n = graph.node(i);
    if (n.op_type() != "Reshape" || !n.domain().empty() || n.input_size() != 2 || n.output_size() != 1) continue;
    if (outputs.count(n.output(0))) continue;
    auto w = weights.find(n.input(0));
    if (w == weights.end() || !external(*w->second)) continue;
    auto c = constants.find(n.input(1));
    const onnx::TensorProto* shape_tensor = c != constants.end() ? c->second : nullptr;
    if (!shape_tensor) {
      auto s = weights.find(n.input(1));
      if (s != weights.end()) shape_tensor = s->second;
    }
    if (!shape_tensor) continue;
    bool allowzero = false;
    for (const auto& a : n.attribute()) allowzero |= a.name() == "allowzero" && a.i() != 0;
    const auto shape = shape_values(*shape_tensor);
    if (!shape || allowzero) continue;
    const std::vector<int64_t> from(w->second->dims().begin(), w->second->dims().end());
    const auto dims = resolve(*shape, from);
    if (!dims) continue;
    onnx::TensorProto alias = *w->second;  // same type and external_data (location, offset, length)
    alias.set_name(n.output(0));
    alias.clear_dims();
    for (int64_t d : *dims) alias.add_dims(d);
    aliases.push_back(std::move(alias));
    removed.insert(i);
  }
  if (removed.empty()) return 0;
  // The Reshapes go, and with them what only they read: the original
  // initializer (when nothing else reads it) and the shape's Constant node.
  // ORT would warn about each one left unused.
  std::set<std::string> read;
  for (int i = 0; i < graph.node_size(); ++i)
    if (!removed.count(i))
      for (const auto& in : graph.node(i).input()) read.insert(in);
  for (const auto& o : graph.output()) read.insert(o.name());
  std::set<std::string> dropped_inputs;
  for (int i : removed)
    for (const auto& in : graph.node(i).input())
      if (!read.count(in)) dropped_inputs.insert(in);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& n = graph.node(i);
    const bool unused_constant = n.op_type() == "Constant" && n.output_size() == 1 && dropped_inputs.count(n.output(0));
    if (!removed.count(i) && !unused_constant) *kept.Add() = n;
  }
  graph.mutable_node()->Swap(&kept);
  google::protobuf::RepeatedPtrField<onnx::TensorProto> initializers;
  for (auto& t : *graph.mutable_initializer())
    if (!dropped_inputs.count(t.name())) *initializers.Add() = std::move(t);
  for (auto& a : aliases) *initializers.Add() = std::move(a);
  graph.mutable_initializer()->Swap(&initializers);
  return int64_t(removed.size());
}

}  // namespace deltagen::rewrite
