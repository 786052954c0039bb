// The builder's table of ONNX Runtime CPU kernels (models/ort_cpu_dtypes.cpp),
// re-measured: every op of the table is built as a one-node model in float16
// and bfloat16 and loaded into a CPU session. Native: it loads and ORT adds no
// Cast; OrtFallback: it loads and ORT adds Casts of its own; Missing: the
// session refuses it. When ORT is upgraded, this says what changed.
#include <gtest/gtest.h>

#include <onnxruntime_cxx_api.h>

#include <functional>
#include <map>

#include "graph/graph_builder.h"
#include "graph/model_summary.h"
#include "graph/onnx_writer.h"
#include "models/ort_cpu_dtypes.h"
#include "ort_step_runner.h"
#include "test_util.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using graph::attr;
using graph::DataType;
using graph::GraphBuilder;

// A zero-filled initializer (values do not matter for kernel lookup).
std::string zeros(GraphBuilder& b, const std::string& name, DataType dt, std::vector<int64_t> dims) {
  graph::Initializer init{name, dt, dims, nullptr};
  const size_t bytes = size_t(graph::tensor_nbytes(dt, graph::numel_of(dims)));
  init.produce = [bytes]() { return graph::WeightBuffer(std::vector<uint8_t>(bytes, 0)); };
  return b.initializer(init);
}

std::string ints(GraphBuilder& b, const std::string& name, std::vector<int64_t> values) {
  graph::Initializer init{name, graph::kInt64, {int64_t(values.size())}, nullptr};
  init.produce = [values]() {
    std::vector<uint8_t> bytes(values.size() * 8);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return graph::WeightBuffer(bytes);
  };
  return b.initializer(init);
}

// Adds one `op` node whose activations are `dt`; returns its output count.
using Recipe = std::function<void(GraphBuilder& b, DataType dt)>;

void unary(GraphBuilder& b, DataType dt, const std::string& op, std::vector<onnx::AttributeProto> attrs = {}) {
  b.input("x", dt, {1, 4, 32});
  b.node(op, "/n", {"x"}, attrs, "", 1, {"y"});
  b.output("y", dt, {});
}

void binary(GraphBuilder& b, DataType dt, const std::string& op) {
  b.input("x", dt, {1, 4, 32});
  b.input("x2", dt, {1, 4, 32});
  b.node(op, "/n", {"x", "x2"}, {}, "", 1, {"y"});
  b.output("y", dt, {});
}

const std::string ms = graph::kMsDomain;

std::map<std::string, Recipe> recipes() {
  return {
      {"Add", [](GraphBuilder& b, DataType dt) { binary(b, dt, "Add"); }},
      {"Mul", [](GraphBuilder& b, DataType dt) { binary(b, dt, "Mul"); }},
      {"Sigmoid", [](GraphBuilder& b, DataType dt) { unary(b, dt, "Sigmoid"); }},
      {"Softplus", [](GraphBuilder& b, DataType dt) { unary(b, dt, "Softplus"); }},
      {"Sqrt", [](GraphBuilder& b, DataType dt) { unary(b, dt, "Sqrt"); }},
      {"Reciprocal", [](GraphBuilder& b, DataType dt) { unary(b, dt, "Reciprocal"); }},
      {"LpNormalization", [](GraphBuilder& b, DataType dt) { unary(b, dt, "LpNormalization", {attr("axis", -1), attr("p", 2)}); }},
      {"Transpose", [](GraphBuilder& b, DataType dt) { unary(b, dt, "Transpose", {attr("perm", std::vector<int64_t>{0, 2, 1})}); }},
      {"Cast", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("Cast", "/n", {"x"}, {attr("to", int64_t(graph::kFloat))}, "", 1, {"y"});
         b.output("y", graph::kFloat, {});
       }},
      {"ReduceSum", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("ReduceSum", "/n", {"x", ints(b, "axes", {-1})}, {attr("keepdims", 1)}, "", 1, {"y"});
         b.output("y", dt, {});
       }},
      {"Reshape", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("Reshape", "/n", {"x", ints(b, "shape", {1, 128})}, {}, "", 1, {"y"});
         b.output("y", dt, {});
       }},
      {"Slice", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("Slice", "/n", {"x", ints(b, "s", {0}), ints(b, "e", {16}), ints(b, "a", {2})}, {}, "", 1, {"y"});
         b.output("y", dt, {});
       }},
      {"Split", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("Split", "/n", {"x", ints(b, "split", {16, 16})}, {attr("axis", -1)}, "", 2, {"y", "y2"});
         b.output("y", dt, {});
         b.output("y2", dt, {});
       }},
      {"Pad", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("Pad", "/n", {"x", ints(b, "pads", {0, 0, 0, 0, 0, 1}), zeros(b, "value", dt, {})}, {}, "", 1, {"y"});
         b.output("y", dt, {});
       }},
      {"Shape", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("Shape", "/n", {"x"}, {}, "", 1, {"y"});
         b.output("y", graph::kInt64, {});
       }},
      {"MoE", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {4, 32});
         b.input("router", dt, {4, 4});
         b.node("MoE", "/n", {"x", "router", zeros(b, "fc1", dt, {4, 32, 32}), "", zeros(b, "fc2", dt, {4, 32, 16})},
                {attr("k", 2), attr("activation_type", "swiglu"), attr("swiglu_fusion", 1)}, ms, 1, {"y"});
         b.output("y", dt, {});
       }},
      {"QMoE", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {4, 32});
         b.input("router", dt, {4, 4});
         b.node("QMoE", "/n",
                {"x", "router", zeros(b, "fc1", graph::kUInt8, {4, 32, 16}), zeros(b, "s1", dt, {4, 32, 2}), "",
                 zeros(b, "fc2", graph::kUInt8, {4, 32, 8}), zeros(b, "s2", dt, {4, 32, 1})},
                {attr("k", 2), attr("activation_type", "swiglu"), attr("swiglu_fusion", 1),
                 attr("expert_weight_bits", 4), attr("block_size", 16)}, ms, 1, {"y"});
         b.output("y", dt, {});
       }},
      {"Gather", [](GraphBuilder& b, DataType dt) {
         b.input("ids", graph::kInt64, {1, 2});
         b.node("Gather", "/n", {zeros(b, "table", dt, {8, 32}), "ids"}, {}, "", 1, {"y"});
         b.output("y", dt, {});
       }},
      {"MatMul", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("MatMul", "/n", {"x", zeros(b, "w", dt, {32, 32})}, {}, "", 1, {"y"});
         b.output("y", dt, {});
       }},
      {"FusedMatMul", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("FusedMatMul", "/n", {"x", zeros(b, "w", dt, {32, 32})}, {attr("transB", 1)}, ms, 1, {"y"});
         b.output("y", dt, {});
       }},
      {"SimplifiedLayerNormalization", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("SimplifiedLayerNormalization", "/n", {"x", zeros(b, "g", dt, {32})},
                {attr("axis", -1), attr("epsilon", 1e-6f), attr("stash_type", 1)}, "", 1, {"y"});
         b.output("y", dt, {});
       }},
      {"SkipSimplifiedLayerNormalization", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.input("x2", dt, {1, 4, 32});
         b.node("SkipSimplifiedLayerNormalization", "/n", {"x", "x2", zeros(b, "g", dt, {32})},
                {attr("epsilon", 1e-6f)}, ms, 1, {"y"});
         b.output("y", dt, {});
       }},
      {"GatedRMSNorm", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.input("z", dt, {1, 4, 32});
         b.node("GatedRMSNorm", "/n", {"x", zeros(b, "g", dt, {16}), "z"}, {attr("epsilon", 1e-6f)}, ms, 1, {"y"});
         b.output("y", dt, {});
       }},
      {"GatherBlockQuantized", [](GraphBuilder& b, DataType dt) {
         b.input("ids", graph::kInt64, {1, 2});
         b.node("GatherBlockQuantized", "/n", {zeros(b, "data", graph::kUInt8, {8, 16}), "ids", zeros(b, "sc", dt, {8, 2})},
                {attr("gather_axis", 0), attr("quantize_axis", 1), attr("block_size", 16), attr("bits", 4)}, ms, 1,
                {"y"});
         b.output("y", dt, {});
       }},
      {"MatMulNBits", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 32});
         b.node("MatMulNBits", "/n",
                {"x", zeros(b, "B", graph::kUInt8, {16, 1, 16}), zeros(b, "sc", dt, {16, 1})},
                {attr("K", 32), attr("N", 16), attr("bits", 4), attr("block_size", 32)}, ms, 1, {"y"});
         b.output("y", dt, {});
       }},
      {"LinearAttentionGate", [](GraphBuilder& b, DataType dt) {
         b.input("a", dt, {1, 4, 4});
         b.input("b", dt, {1, 4, 4});
         b.node("LinearAttentionGate", "/n",
                {"a", zeros(b, "dt_bias", graph::kFloat, {4}), zeros(b, "scale", graph::kFloat, {4}), "b"}, {}, ms, 2,
                {"y", "y2"});
         b.output("y", dt, {});
         b.output("y2", dt, {});
       }},
      {"RotaryEmbedding", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 4, 64});
         b.input("pos", graph::kInt64, {1, 4});
         b.node("RotaryEmbedding", "/n", {"x", "pos", zeros(b, "cos", dt, {16, 8}), zeros(b, "sin", dt, {16, 8})},
                {attr("num_heads", 2), attr("rotary_embedding_dim", 16), attr("interleaved", 0)}, ms, 1, {"y"});
         b.output("y", dt, {});
       }},
      {"GroupQueryAttention", [](GraphBuilder& b, DataType dt) {
         b.input("q", dt, {1, 4, 64});
         b.input("k", dt, {1, 4, 32});
         b.input("v", dt, {1, 4, 32});
         b.input("pk", dt, {1, 1, std::string("past"), 32});
         b.input("pv", dt, {1, 1, std::string("past"), 32});
         b.input("seqlens", graph::kInt32, {1});
         b.input("total", graph::kInt32, {});
         b.node("GroupQueryAttention", "/n", {"q", "k", "v", "pk", "pv", "seqlens", "total"},
                {attr("num_heads", 2), attr("kv_num_heads", 1)}, ms, 3, {"y", "y2", "y3"});
         for (const char* o : {"y", "y2", "y3"}) b.output(o, dt, {});
       }},
      {"CausalConvWithState", [](GraphBuilder& b, DataType dt) {
         b.input("x", dt, {1, 8, 4});
         b.input("state", dt, {1, 8, 3});
         b.node("CausalConvWithState", "/n", {"x", zeros(b, "w", dt, {8, 1, 4}), "", "state"},
                {attr("ndim", 1), attr("activation", "silu")}, ms, 2, {"y", "y2"});
         b.output("y", dt, {});
         b.output("y2", dt, {});
       }},
      {"LinearAttention", [](GraphBuilder& b, DataType dt) {
         for (const char* n : {"q", "k", "v"}) b.input(n, dt, {1, 4, 32});
         b.input("state", dt, {1, 2, 16, 16});
         b.input("decay", dt, {1, 4, 2});
         b.input("beta", dt, {1, 4, 2});
         b.node("LinearAttention", "/n", {"q", "k", "v", "state", "decay", "beta"},
                {attr("q_num_heads", 2), attr("kv_num_heads", 2), attr("update_rule", "gated_delta")}, ms, 2,
                {"y", "y2"});
         b.output("y", dt, {});
         b.output("y2", dt, {});
       }},
  };
}

// Loads the one-node model; nullopt if the session refuses it, else the
// number of Casts ONNX Runtime added.
std::optional<int> casts_added(const Recipe& recipe, DataType dt) {
  test::TempDir tmp;
  GraphBuilder b("kernel_probe");
  recipe(b, dt);
  const int before = int(std::count_if(b.graph().node().begin(), b.graph().node().end(),
                                       [](const auto& n) { return n.op_type() == "Cast"; }));
  graph::write_model(graph::make_model(b, {{"", 21}, {graph::kMsDomain, 1}}, 10, "ort_cpu_dtypes_test"),
                     b.take_initializers(), tmp / "m.onnx", graph::WriteOptions{});
  Ort::SessionOptions so;
  so.SetIntraOpNumThreads(1);
  so.SetGraphOptimizationLevel(GraphOptimizationLevel::ORT_ENABLE_BASIC);
  so.SetOptimizedModelFilePath((tmp / "opt.onnx").c_str());
  try {
    Ort::Session session(test::ort_test_env(), (tmp / "m.onnx").c_str(), so);
  } catch (const Ort::Exception&) {
    return std::nullopt;
  }
  onnx::ModelProto opt = graph::load_model_proto(tmp / "opt.onnx");
  int after = 0;
  for (const auto& n : opt.graph().node()) after += n.op_type() == "Cast";
  return after - before;
}

TEST(CpuKernels, TableMatchesOnnxRuntime) {
  auto all = recipes();
  for (const std::string& op : cpu_kernel_ops()) {
    ASSERT_TRUE(all.count(op)) << "no recipe for " << op;
    for (DataType dt : {graph::kFloat16, graph::kBFloat16}) {
      SCOPED_TRACE(op + " " + graph::dtype_name(dt));
      std::optional<int> added = casts_added(all.at(op), dt);
      switch (cpu_kernel(op, dt)) {
        case CpuKernel::Native:
          ASSERT_TRUE(added.has_value()) << "does not load";
          EXPECT_EQ(*added, 0);
          break;
        case CpuKernel::OrtFallback:
          ASSERT_TRUE(added.has_value()) << "does not load";
          EXPECT_GT(*added, 0);
          break;
        case CpuKernel::Missing: EXPECT_FALSE(added.has_value()) << "loads, with " << *added << " Casts added"; break;
      }
    }
    // And every op runs in float.
    EXPECT_EQ(casts_added(all.at(op), graph::kFloat), std::optional<int>(0)) << op;
  }
}

TEST(CpuKernels, ComputeDtypeFollowsTheTable) {
  EXPECT_EQ(cpu_compute_dtype("MatMulNBits", graph::kFloat16), graph::kFloat16);
  EXPECT_EQ(cpu_compute_dtype("Mul", graph::kFloat16), graph::kFloat16);  // ORT's own fallback
  EXPECT_EQ(cpu_compute_dtype("Mul", graph::kBFloat16), graph::kFloat);
  EXPECT_EQ(cpu_compute_dtype("SkipSimplifiedLayerNormalization", graph::kBFloat16), graph::kBFloat16);
  EXPECT_EQ(cpu_compute_dtype("LinearAttention", graph::kFloat16), graph::kFloat);
  EXPECT_EQ(cpu_compute_dtype("CausalConvWithState", graph::kFloat16), graph::kFloat);
  EXPECT_EQ(cpu_compute_dtype("MoE", graph::kFloat16), graph::kFloat);  // loads, computes zeros (docs/moe.md)
  EXPECT_EQ(cpu_compute_dtype("QMoE", graph::kFloat16), graph::kFloat16);
}

}  // namespace
}  // namespace deltagen
