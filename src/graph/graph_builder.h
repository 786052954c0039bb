// A thin layer over onnx::ModelProto for writing inference graphs by hand.
//
// Naming follows onnxruntime-genai's builder so graphs are easy to compare:
// nodes get hierarchical names ("/model/layers.3/attn/q_proj/MatMul") and
// their outputs "{node}/output_{i}"; shared constants live under
// "/model/constants/...". Weights are Initializers whose bytes are produced
// lazily, when the model is written (see onnx_writer.h), so a multi-GB
// checkpoint never has to sit in memory at once.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <onnx/onnx_pb.h>

namespace deltagen::graph {

using DataType = onnx::TensorProto_DataType;
constexpr DataType kFloat = onnx::TensorProto_DataType_FLOAT;
constexpr DataType kFloat16 = onnx::TensorProto_DataType_FLOAT16;
constexpr DataType kBFloat16 = onnx::TensorProto_DataType_BFLOAT16;
constexpr DataType kInt64 = onnx::TensorProto_DataType_INT64;
constexpr DataType kInt32 = onnx::TensorProto_DataType_INT32;
constexpr DataType kUInt8 = onnx::TensorProto_DataType_UINT8;
constexpr DataType kBool = onnx::TensorProto_DataType_BOOL;

// "float32", "int64", ... (numpy-style, used by inspect and error messages).
std::string dtype_name(int dtype);
// Bytes of a tensor with `numel` elements; sub-byte types (int4) round up.
int64_t tensor_nbytes(DataType dtype, int64_t numel);
int64_t numel_of(const std::vector<int64_t>& dims);

// One dimension of a graph input/output: fixed (64) or symbolic ("batch_size").
using Dim = std::variant<int64_t, std::string>;

// The bytes of one weight, in whichever element type produced them (so an
// fp32 tensor is not copied just to be viewed as bytes).
class WeightBuffer {
 public:
  WeightBuffer() = default;
  WeightBuffer(std::vector<uint8_t> v) : data_(std::move(v)) {}   // NOLINT: implicit on purpose
  WeightBuffer(std::vector<uint16_t> v) : data_(std::move(v)) {}  // fp16 / bf16 bits
  WeightBuffer(std::vector<float> v) : data_(std::move(v)) {}

  const uint8_t* bytes() const {
    return std::visit([](const auto& v) { return reinterpret_cast<const uint8_t*>(v.data()); }, data_);
  }
  size_t size() const {
    return std::visit([](const auto& v) { return v.size() * sizeof(v[0]); }, data_);
  }

 private:
  std::variant<std::vector<uint8_t>, std::vector<uint16_t>, std::vector<float>> data_;
};

// A weight. `produce` is called exactly once, when the model is written, and
// must return tensor_nbytes(dtype, numel(dims)) little-endian bytes.
struct Initializer {
  std::string name;
  DataType dtype = kFloat;
  std::vector<int64_t> dims;
  std::function<WeightBuffer()> produce;

  int64_t nbytes() const { return tensor_nbytes(dtype, numel_of(dims)); }
};

// Node attributes, built with the helpers below: {attr("axis", -1), ...}.
onnx::AttributeProto attr(const std::string& name, int64_t value);
onnx::AttributeProto attr(const std::string& name, int value);
onnx::AttributeProto attr(const std::string& name, float value);
onnx::AttributeProto attr(const std::string& name, double value);
onnx::AttributeProto attr(const std::string& name, const char* value);
onnx::AttributeProto attr(const std::string& name, const std::string& value);
onnx::AttributeProto attr(const std::string& name, const std::vector<int64_t>& values);

inline const std::string kMsDomain = "com.microsoft";

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string graph_name);

  // Adds a node; returns its outputs. `outputs` names them explicitly
  // ("" = an unused optional output); when empty, `num_outputs` outputs are
  // named "{name}/output_{i}". Node names must be unique.
  std::vector<std::string> node(const std::string& op_type, const std::string& name,
                                const std::vector<std::string>& inputs,
                                const std::vector<onnx::AttributeProto>& attrs = {},
                                const std::string& domain = "", int num_outputs = 1,
                                const std::vector<std::string>& outputs = {});
  // The common case: one output.
  std::string op(const std::string& op_type, const std::string& name, const std::vector<std::string>& inputs,
                 const std::vector<onnx::AttributeProto>& attrs = {}, const std::string& domain = "") {
    return node(op_type, name, inputs, attrs, domain).front();
  }

  // Adds a weight; returns its name (the tensor name nodes refer to). A
  // copy, not a reference: the weight list grows with every call.
  std::string initializer(Initializer init);

  // Deduplicated Constant nodes ("/model/constants/INT64/1D/0,0,4,16"):
  // asking twice for the same value returns the same tensor.
  std::string constant_i64(const std::vector<int64_t>& values);  // 1-D
  std::string constant_i64_scalar(int64_t value);
  std::string constant_f32_scalar(float value);

  void input(const std::string& name, DataType dtype, const std::vector<Dim>& shape);
  // An int64 input of shape [values.size()] that a run may leave out: the
  // values are an initializer of the same name (ONNX IR >= 4 treats it as the
  // input's default), so runtimes that never heard of it run the model as is.
  void input_with_default(const std::string& name, const std::vector<int64_t>& values);
  void output(const std::string& name, DataType dtype, const std::vector<Dim>& shape);

  const onnx::GraphProto& graph() const { return graph_; }
  const std::vector<Initializer>& initializers() const { return initializers_; }
  // Moves the weights out (the writer consumes them).
  std::vector<Initializer> take_initializers() { return std::move(initializers_); }

 private:
  std::string constant(const std::string& key, onnx::TensorProto value);
  void claim_tensor_name(const std::string& name);

  onnx::GraphProto graph_;
  std::vector<Initializer> initializers_;
  std::set<std::string> node_names_, tensor_names_;
  std::map<std::string, std::string> constants_;  // key -> output name
};

// Graph I/O helper shared by builders and tests.
onnx::ValueInfoProto value_info(const std::string& name, DataType dtype, const std::vector<Dim>& shape);

}  // namespace deltagen::graph
