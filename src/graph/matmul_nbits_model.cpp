#include "graph/matmul_nbits_model.h"

#include <fstream>
#include <string>

#include "graph/graph_builder.h"
#include "deltagen/error.h"

namespace deltagen::graph {
namespace fs = std::filesystem;

namespace {

void add_initializer(onnx::GraphProto& graph, const std::string& name, int dtype, const std::vector<int64_t>& dims,
                     const void* data, size_t bytes) {
  onnx::TensorProto* t = graph.add_initializer();
  t->set_name(name);
  t->set_data_type(dtype);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(data, bytes);
}

void add_tensor_value_info(onnx::ValueInfoProto* v, const std::string& name, const std::string& rows, int64_t cols) {
  v->set_name(name);
  auto* tensor = v->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto_DataType_FLOAT);
  tensor->mutable_shape()->add_dim()->set_dim_param(rows);
  tensor->mutable_shape()->add_dim()->set_dim_value(cols);
}

}  // namespace

onnx::ModelProto matmul_nbits_model(const std::vector<MatMulNBitsNode>& nodes, int64_t accuracy_level) {
  if (nodes.empty()) fail("matmul_nbits_model", "no nodes");
  const int64_t k = nodes.front().weights.shape.k;
  onnx::ModelProto model;
  model.set_ir_version(10);
  model.set_producer_name("deltagen");
  for (auto [domain, version] : {std::pair<const char*, int>{"", 21}, {"com.microsoft", 1}}) {
    auto* op = model.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name("matmul_nbits");
  add_tensor_value_info(graph.add_input(), "A", "M", k);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const kernels::NBitsWeightsView& w = nodes[i].weights;
    const kernels::NBitsShape& s = w.shape;
    if (s.k != k) fail("matmul_nbits_model", "all nodes must share K");
    const std::string id = std::to_string(i);
    // prefix + id, appended: GCC 12 warns (-Wrestrict, falsely) on "literal" + string.
    auto named = [&id](const char* prefix) { return std::string(prefix).append(id); };
    onnx::NodeProto& node = *graph.add_node();
    node.set_op_type("MatMulNBits");
    node.set_domain("com.microsoft");
    node.set_name(named("MatMul_Q4_"));
    node.add_input(std::string("A"));  // not the const char* overload: GCC 12 -Wrestrict false positive
    node.add_input(named("B"));
    node.add_input(named("scales"));
    add_initializer(graph, named("B"), onnx::TensorProto_DataType_UINT8, {s.n, s.k_blocks(), s.file_block_bytes()}, w.data,
                    size_t(s.n * s.k_blocks() * s.file_block_bytes()));
    add_initializer(graph, named("scales"), onnx::TensorProto_DataType_FLOAT, {s.n * s.k_blocks()}, w.scales,
                    size_t(s.n * s.k_blocks()) * sizeof(float));
    if (w.zero_points || nodes[i].bias) node.add_input(w.zero_points ? named("zero_points") : "");
    if (w.zero_points)
      add_initializer(graph, named("zero_points"), onnx::TensorProto_DataType_UINT8, {s.n * s.zero_point_row_bytes()},
                      w.zero_points, size_t(s.n * s.zero_point_row_bytes()));
    if (nodes[i].bias) {
      node.add_input("");  // g_idx
      node.add_input(named("bias"));
      add_initializer(graph, named("bias"), onnx::TensorProto_DataType_FLOAT, {s.n}, nodes[i].bias, size_t(s.n) * sizeof(float));
    }
    node.add_output(named("Y"));
    add_tensor_value_info(graph.add_output(), named("Y"), "M", s.n);
    *node.add_attribute() = attr("K", int64_t(s.k));
    *node.add_attribute() = attr("N", int64_t(s.n));
    *node.add_attribute() = attr("bits", int64_t(s.bits));
    *node.add_attribute() = attr("block_size", int64_t(s.block_size));
    *node.add_attribute() = attr("accuracy_level", int64_t(accuracy_level));
  }
  return model;
}

void save_with_external_data(onnx::ModelProto model, const fs::path& model_path) {
  std::string data_name = model_path.filename().string();
  data_name += ".data";
  std::ofstream data(model_path.parent_path() / data_name, std::ios::binary);
  int64_t offset = 0;
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    const int64_t aligned = (offset + 4095) / 4096 * 4096;
    data.write(std::string(size_t(aligned - offset), '\0').data(), aligned - offset);
    const std::string& raw = t.raw_data();
    data.write(raw.data(), std::streamsize(raw.size()));
    for (auto [key, value] : {std::pair<std::string, std::string>{"location", data_name},
                              {"offset", std::to_string(aligned)},
                              {"length", std::to_string(raw.size())}}) {
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    }
    t.set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
    offset = aligned + int64_t(raw.size());
    t.clear_raw_data();
  }
  std::ofstream out(model_path, std::ios::binary);
  if (!model.SerializeToOstream(&out) || !data) fail(model_path.string(), "cannot write");
}

}  // namespace deltagen::graph
