#include "graph/graph_builder.h"

#include <cstring>

#include <cstdio>
#include <stdexcept>

namespace deltagen::graph {

std::string dtype_name(int dtype) {
  switch (dtype) {
    case onnx::TensorProto_DataType_FLOAT: return "float32";
    case onnx::TensorProto_DataType_FLOAT16: return "float16";
    case onnx::TensorProto_DataType_BFLOAT16: return "bfloat16";
    case onnx::TensorProto_DataType_DOUBLE: return "float64";
    case onnx::TensorProto_DataType_INT64: return "int64";
    case onnx::TensorProto_DataType_INT32: return "int32";
    case onnx::TensorProto_DataType_INT16: return "int16";
    case onnx::TensorProto_DataType_INT8: return "int8";
    case onnx::TensorProto_DataType_UINT8: return "uint8";
    case onnx::TensorProto_DataType_BOOL: return "bool";
    case onnx::TensorProto_DataType_STRING: return "string";
    case 21: return "uint4";  // UINT4/INT4 postdate libonnx 1.12's enum
    case 22: return "int4";
    default: return "dtype" + std::to_string(dtype);
  }
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

int64_t tensor_nbytes(DataType dtype, int64_t numel) {
  switch (int(dtype)) {
    case onnx::TensorProto_DataType_FLOAT:
    case onnx::TensorProto_DataType_INT32: return numel * 4;
    case onnx::TensorProto_DataType_FLOAT16:
    case onnx::TensorProto_DataType_BFLOAT16:
    case onnx::TensorProto_DataType_INT16: return numel * 2;
    case onnx::TensorProto_DataType_DOUBLE:
    case onnx::TensorProto_DataType_INT64: return numel * 8;
    case onnx::TensorProto_DataType_UINT8:
    case onnx::TensorProto_DataType_INT8:
    case onnx::TensorProto_DataType_BOOL: return numel;
    case 21:
    case 22: return (numel + 1) / 2;  // two 4-bit values per byte
    default: throw std::logic_error("tensor_nbytes: unsupported dtype " + dtype_name(dtype));
  }
}

// ---- attributes ------------------------------------------------------------------

onnx::AttributeProto attr(const std::string& name, int64_t value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto_AttributeType_INT);
  a.set_i(value);
  return a;
}
onnx::AttributeProto attr(const std::string& name, int value) { return attr(name, int64_t(value)); }

onnx::AttributeProto attr(const std::string& name, float value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto_AttributeType_FLOAT);
  a.set_f(value);
  return a;
}
onnx::AttributeProto attr(const std::string& name, double value) { return attr(name, float(value)); }

onnx::AttributeProto attr(const std::string& name, const std::string& value) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto_AttributeType_STRING);
  a.set_s(value);
  return a;
}
onnx::AttributeProto attr(const std::string& name, const char* value) { return attr(name, std::string(value)); }

onnx::AttributeProto attr(const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto_AttributeType_INTS);
  for (int64_t v : values) a.add_ints(v);
  return a;
}

// ---- value infos -----------------------------------------------------------------

onnx::ValueInfoProto value_info(const std::string& name, DataType dtype, const std::vector<Dim>& shape) {
  onnx::ValueInfoProto vi;
  vi.set_name(name);
  auto* tensor = vi.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(dtype);
  auto* s = tensor->mutable_shape();
  for (const Dim& d : shape) {
    auto* dim = s->add_dim();
    if (const auto* v = std::get_if<int64_t>(&d))
      dim->set_dim_value(*v);
    else
      dim->set_dim_param(std::get<std::string>(d));
  }
  return vi;
}

// ---- the builder -----------------------------------------------------------------

GraphBuilder::GraphBuilder(std::string graph_name) { graph_.set_name(std::move(graph_name)); }

void GraphBuilder::claim_tensor_name(const std::string& name) {
  if (name.empty()) return;
  if (!tensor_names_.insert(name).second) throw std::logic_error("graph: tensor '" + name + "' defined twice");
}

std::vector<std::string> GraphBuilder::node(const std::string& op_type, const std::string& name,
                                            const std::vector<std::string>& inputs,
                                            const std::vector<onnx::AttributeProto>& attrs,
                                            const std::string& domain, int num_outputs,
                                            const std::vector<std::string>& outputs) {
  if (!node_names_.insert(name).second) throw std::logic_error("graph: node '" + name + "' defined twice");
  std::vector<std::string> outs = outputs;
  if (outs.empty())
    for (int i = 0; i < num_outputs; ++i) outs.push_back(name + "/output_" + std::to_string(i));
  for (const auto& o : outs) claim_tensor_name(o);

  onnx::NodeProto* n = graph_.add_node();
  n->set_op_type(op_type);
  n->set_name(name);
  if (!domain.empty()) n->set_domain(domain);
  for (const auto& i : inputs) n->add_input(i);
  // Trailing unused optional outputs are dropped; inner ones stay as "".
  size_t used = outs.size();
  while (used > 0 && outs[used - 1].empty()) --used;
  for (size_t i = 0; i < used; ++i) n->add_output(outs[i]);
  for (const auto& a : attrs) *n->add_attribute() = a;
  return outs;
}

std::string GraphBuilder::initializer(Initializer init) {
  claim_tensor_name(init.name);
  initializers_.push_back(std::move(init));
  return initializers_.back().name;
}

std::string GraphBuilder::constant(const std::string& key, onnx::TensorProto value) {
  auto it = constants_.find(key);
  if (it != constants_.end()) return it->second;
  onnx::AttributeProto a;
  a.set_name("value");
  a.set_type(onnx::AttributeProto_AttributeType_TENSOR);
  *a.mutable_t() = std::move(value);
  std::string out = op("Constant", "/model/constants/" + key, {}, {a});
  constants_.emplace(key, out);
  return out;
}

namespace {
std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}
}  // namespace

std::string GraphBuilder::constant_i64(const std::vector<int64_t>& values) {
  onnx::TensorProto t;
  t.set_data_type(kInt64);
  t.add_dims(int64_t(values.size()));
  for (int64_t v : values) t.add_int64_data(v);
  return constant("INT64/1D/" + join(values), std::move(t));
}

std::string GraphBuilder::constant_i64_scalar(int64_t value) {
  onnx::TensorProto t;
  t.set_data_type(kInt64);
  t.add_int64_data(value);
  return constant("INT64/0D/" + std::to_string(value), std::move(t));
}

std::string GraphBuilder::constant_f32_scalar(float value) {
  onnx::TensorProto t;
  t.set_data_type(kFloat);
  t.add_float_data(value);
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", double(value));
  return constant(std::string("FLOAT/0D/") + text, std::move(t));
}

void GraphBuilder::input(const std::string& name, DataType dtype, const std::vector<Dim>& shape) {
  claim_tensor_name(name);
  *graph_.add_input() = value_info(name, dtype, shape);
}

void GraphBuilder::input_with_default(const std::string& name, const std::vector<int64_t>& values) {
  input(name, kInt64, {Dim(int64_t(values.size()))});
  std::vector<uint8_t> bytes(values.size() * sizeof(int64_t));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  Initializer init{name, kInt64, {int64_t(values.size())}, [bytes] { return WeightBuffer(bytes); }};
  initializers_.push_back(std::move(init));  // the name was claimed by the input
}

void GraphBuilder::output(const std::string& name, DataType dtype, const std::vector<Dim>& shape) {
  *graph_.add_output() = value_info(name, dtype, shape);
}

}  // namespace deltagen::graph
