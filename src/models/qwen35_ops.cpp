// Typed graph primitives of the Qwen3.5 builder: every value's dtype is
// recorded when it is created, so ops can be placed in the dtype the CPU EP
// runs them in and Casts appear only at dtype boundaries.
#include <stdexcept>

#include "models/ort_cpu_dtypes.h"
#include "models/qwen35_graph.h"

namespace deltagen::qwen35 {

using graph::attr;

namespace {

bool is_float(DataType t) { return t == graph::kFloat || t == graph::kFloat16 || t == graph::kBFloat16; }

}  // namespace

std::string weight_name_for(const std::string& node) {
  std::string n = node.substr(node[0] == '/' ? 1 : 0);
  for (char& c : n)
    if (c == '/') c = '.';
  return n + ".weight";
}

std::string Graph::layer_path(int64_t i) const {
  if (i < cfg_.num_hidden_layers) return "/model/layers." + std::to_string(i);
  return "/mtp/layers." + std::to_string(i - cfg_.num_hidden_layers);
}

std::string Graph::ckpt_layer(int64_t i) const {
  if (i < cfg_.num_hidden_layers) return "layers." + std::to_string(i) + ".";
  return "mtp.layers." + std::to_string(i - cfg_.num_hidden_layers) + ".";
}

DataType Graph::dtype_of(const std::string& value) const {
  auto it = dtypes_.find(value);
  // Constants from the GraphBuilder (shapes, axes, indices) are int64.
  return it == dtypes_.end() ? graph::kInt64 : it->second;
}

DataType Graph::run_dtype(const std::string& op_type) const {
  return cpu_compute_dtype(op_type, plan_.activations);
}

std::vector<std::string> Graph::node(const std::string& op_type, const std::string& name,
                                     const std::vector<std::string>& inputs,
                                     const std::vector<onnx::AttributeProto>& attrs, const std::string& domain,
                                     const std::vector<DataType>& output_dtypes,
                                     const std::vector<std::string>& outputs) {
  auto outs = b_.node(op_type, name, inputs, attrs, domain, int(output_dtypes.size()), outputs);
  for (size_t i = 0; i < outs.size() && i < output_dtypes.size(); ++i)
    if (!outs[i].empty()) dtypes_[outs[i]] = output_dtypes[i];
  return outs;
}

std::string Graph::op(const std::string& op_type, const std::string& name, const std::vector<std::string>& inputs,
                      DataType output_dtype, const std::vector<onnx::AttributeProto>& attrs,
                      const std::string& domain) {
  return node(op_type, name, inputs, attrs, domain, {output_dtype}).front();
}

std::string Graph::compute(const std::string& op_type, const std::string& name,
                           const std::vector<std::string>& inputs, const std::vector<onnx::AttributeProto>& attrs,
                           const std::string& domain) {
  const DataType dt = run_dtype(op_type);
  std::vector<std::string> typed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& in = inputs[i];
    typed.push_back(!in.empty() && is_float(dtype_of(in)) ? cast(in, dt, name + "/input_" + std::to_string(i) + "/Cast")
                                                          : in);
  }
  return op(op_type, name, typed, dt, attrs, domain);
}

std::string Graph::cast(const std::string& x, DataType to, const std::string& name) {
  if (dtype_of(x) == to) return x;
  auto key = std::make_pair(x, int(to));
  auto it = casts_.find(key);
  if (it != casts_.end()) return it->second;
  std::string out = op("Cast", name, {x}, to, {attr("to", int64_t(to))});
  casts_.emplace(key, out);
  return out;
}

std::string Graph::weight(graph::Initializer init) {
  const DataType dt = init.dtype;
  std::string name = b_.initializer(std::move(init));
  dtypes_[name] = dt;
  return name;
}

void Graph::graph_input(const std::string& name, DataType dtype, const std::vector<graph::Dim>& shape) {
  b_.input(name, dtype, shape);
  dtypes_[name] = dtype;
}

std::string Graph::reshape(const std::string& name, const std::string& x, const std::vector<int64_t>& shape) {
  return op("Reshape", name, {x, b_.constant_i64(shape)}, dtype_of(x));
}

}  // namespace deltagen::qwen35
