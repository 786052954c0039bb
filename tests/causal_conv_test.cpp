// deltagen.CausalConvWithState: the kernel against a plain reference, and the
// custom op against ONNX Runtime's own com.microsoft.CausalConvWithState on
// the same one-node model (decode L = 1 and prefill L > kernel, batch 2, with
// and without bias and past state), plus the golden model's conv nodes moving.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <vector>

#include <onnx/onnx_pb.h>

#include "checkpoint/checkpoint.h"
#include "kernels/causal_conv.h"
#include "models/build.h"
#include "ortext/deltagen_ops.h"
#include "ortext/fast_session.h"
#include "reference/qwen35_ops.h"
#include "rewrite/model_rewrite.h"
#include "runtime/session.h"
#include "test_util.h"

namespace deltagen {
namespace {

using test::TempDir;
namespace fs = std::filesystem;

std::vector<float> conv_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.5f, 1.5f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// The definition in double, one token at a time through the reference
// model's conv step (reference/qwen35_ops.h): each channel's window holds K
// inputs, the K-1 carried ones last.
void reference(const kernels::CausalConvShape& s, const std::vector<float>& x, const std::vector<float>& w,
               const float* bias, const float* past, bool silu, std::vector<float>& y, std::vector<float>& present) {
  const int64_t k = s.kernel, l = s.length, st = k - 1;
  y.assign(size_t(s.batch * s.channels * l), 0.0f);
  present.assign(size_t(s.batch * s.channels * st), 0.0f);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t c = 0; c < s.channels; ++c) {
      const int64_t row = b * s.channels + c;
      const std::vector<double> taps(w.begin() + c * k, w.begin() + (c + 1) * k);
      std::vector<double> window(size_t(k), 0.0);
      for (int64_t i = 0; i < st; ++i) window[size_t(1 + i)] = past ? past[row * st + i] : 0.0;
      for (int64_t t = 0; t < l; ++t) {
        const double acc = (bias ? bias[c] : 0.0) + ref::causal_conv_step(window.data(), taps.data(), k, x[size_t(row * l + t)]);
        y[size_t(row * l + t)] = float(silu ? ref::silu(acc) : acc);
      }
      for (int64_t i = 0; i < st; ++i) present[size_t(row * st + i)] = float(window[size_t(1 + i)]);
    }
}

TEST(CausalConv, KernelMatchesTheDefinition) {
  std::mt19937 rng(3);
  for (int64_t l : {1, 2, 3, 9, 300})
    for (int64_t k : {1, 2, 4})
      for (bool with_past : {false, true})
        for (bool silu : {false, true}) {
          const kernels::CausalConvShape s{2, 37, l, k};
          auto x = conv_values(size_t(s.batch * s.channels * l), rng);
          auto w = conv_values(size_t(s.channels * k), rng);
          auto bias = conv_values(size_t(s.channels), rng);
          auto past = conv_values(size_t(s.batch * s.channels * (k - 1)), rng);
          std::vector<float> y(x.size()), present(past.size()), want_y, want_present;
          const float* p = with_past ? past.data() : nullptr;
          kernels::causal_conv1d(s, x.data(), w.data(), bias.data(), p, silu, y.data(), present.data(),
                                 kernels::SerialParallel());
          reference(s, x, w, bias.data(), p, silu, want_y, want_present);
          for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want_y[i], 1e-5) << "l=" << l << " k=" << k << " i=" << i;
          EXPECT_EQ(present, want_present);
        }
}

// input [B, C, L] -> com.microsoft.CausalConvWithState -> output, present_state.
onnx::ModelProto conv_model(int64_t channels, int64_t k, const std::vector<float>& w, const std::vector<float>* bias,
                            bool with_past) {
  onnx::ModelProto m;
  m.set_ir_version(10);
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(21);
  opset = m.add_opset_import();
  opset->set_domain("com.microsoft");
  opset->set_version(1);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("conv");
  auto add_value = [](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
                      std::vector<std::string> dims) {
    onnx::ValueInfoProto* v = list->Add();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto_DataType_FLOAT);
    for (const auto& d : dims) {
      auto* dim = t->mutable_shape()->add_dim();
      if (std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
      else dim->set_dim_param(d);
    }
  };
  const std::string c = std::to_string(channels), st = std::to_string(k - 1);
  add_value(g.mutable_input(), "x", {"batch", c, "length"});
  if (with_past) add_value(g.mutable_input(), "past", {"batch", c, st});
  add_value(g.mutable_output(), "y", {"batch", c, "length"});
  add_value(g.mutable_output(), "present", {"batch", c, st});
  auto add_init = [&](const std::string& name, const std::vector<float>& v, std::vector<int64_t> dims) {
    onnx::TensorProto* t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto_DataType_FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float f : v) t->add_float_data(f);
  };
  add_init("w", w, {channels, 1, k});
  if (bias) add_init("bias", *bias, {channels});
  onnx::NodeProto* n = g.add_node();
  n->set_op_type("CausalConvWithState");
  n->set_domain("com.microsoft");
  n->set_name("/conv");
  n->add_input("x");
  n->add_input("w");
  n->add_input(bias ? "bias" : "");
  n->add_input(with_past ? "past" : "");
  n->add_output("y");
  n->add_output("present");
  auto* a = n->add_attribute();
  a->set_name("ndim");
  a->set_type(onnx::AttributeProto_AttributeType_INT);
  a->set_i(1);
  a = n->add_attribute();
  a->set_name("activation");
  a->set_type(onnx::AttributeProto_AttributeType_STRING);
  a->set_s("silu");
  return m;
}

std::vector<std::vector<float>> run_conv(Ort::Session& session, std::vector<float>& x, std::vector<float>* past,
                                         int64_t batch, int64_t channels, int64_t length, int64_t k) {
  const auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  std::vector<Ort::Value> inputs;
  std::vector<const char*> names = {"x"};
  const std::vector<int64_t> xd = {batch, channels, length}, pd = {batch, channels, k - 1};
  inputs.push_back(Ort::Value::CreateTensor<float>(mem, x.data(), x.size(), xd.data(), 3));
  if (past) {
    names.push_back("past");
    inputs.push_back(Ort::Value::CreateTensor<float>(mem, past->data(), past->size(), pd.data(), 3));
  }
  const char* outs[] = {"y", "present"};
  auto out = session.Run(Ort::RunOptions{nullptr}, names.data(), inputs.data(), inputs.size(), outs, 2);
  std::vector<std::vector<float>> result;
  for (auto& v : out) {
    const float* p = v.GetTensorData<float>();
    result.emplace_back(p, p + v.GetTensorTypeAndShapeInfo().GetElementCount());
  }
  return result;
}

TEST(CausalConv, CustomOpMatchesOrtsKernel) {
  std::mt19937 rng(5);
  const int64_t channels = 96, k = 4;
  for (bool with_bias : {false, true})
    for (bool with_past : {false, true}) {
      TempDir dir;
      auto w = conv_values(size_t(channels * k), rng);
      auto bias = conv_values(size_t(channels), rng);
      const fs::path path = dir / "conv.onnx";
      {
        std::ofstream out(path, std::ios::binary);
        conv_model(channels, k, w, with_bias ? &bias : nullptr, with_past).SerializeToOstream(&out);
      }
      Ort::SessionOptions options;
      options.SetIntraOpNumThreads(2);
      Ort::Session stock(ort_env(), path.c_str(), options);
      rewrite::RewriteSummary summary;
      Ort::Session fast = ortext::create_session_with_fast_kernels(ort_env(), path, options, &summary);
      ASSERT_EQ(summary.causal_conv, 1);
      for (int64_t length : {1, 7}) {
        const int64_t batch = 2;
        auto x = conv_values(size_t(batch * channels * length), rng);
        auto past = conv_values(size_t(batch * channels * (k - 1)), rng);
        auto want = run_conv(stock, x, with_past ? &past : nullptr, batch, channels, length, k);
        auto got = run_conv(fast, x, with_past ? &past : nullptr, batch, channels, length, k);
        ASSERT_EQ(got.size(), 2u);
        ASSERT_EQ(got[0].size(), want[0].size());
        for (size_t i = 0; i < got[0].size(); ++i) ASSERT_NEAR(got[0][i], want[0][i], 1e-5) << i;
        EXPECT_EQ(got[1], want[1]);
      }
    }
}

TEST(CausalConv, GoldenFp32ModelRunsItsConvNodesOnDeltagen) {
  TempDir dir;
  {
    auto ckpt = Checkpoint::open(test::golden_checkpoint());
    build_model(*ckpt, BuildOptions{}, dir / "model");
  }
  auto on = Model::load(dir / "model", RuntimeOptions{.kernels = {.set = KernelSet::DeltagenOps}});
  auto off = Model::load(dir / "model", RuntimeOptions{.kernels = {.set = KernelSet::Ort}});
  // tiny-a, fp32 (no MatMulNBits): 3 linear-attention layers' convs + 1 attention
  EXPECT_EQ(on->fast_kernel_nodes(), 4);
  EXPECT_EQ(off->fast_kernel_nodes(), 0);
}

}  // namespace
}  // namespace deltagen
