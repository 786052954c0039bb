// `deltagen build --layer-outputs` on the golden checkpoint: the graph gains
// hidden_states.0..N and nothing else changes (the logits are bit-identical to
// a build without the option, on stock ONNX Runtime and on deltagen's kernels,
// fp32 and int4), stock ORT runs it, the generation loop ignores the extra
// outputs, and Generator::fetch_outputs hands them out when asked.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "graph/model_summary.h"
#include "graph_query.h"
#include "measure/graph_facts.h"
#include "models/build.h"
#include "ort_step_runner.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "runtime/tensor.h"
#include "test_util.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::golden_checkpoint;
using test::nodes_of;
using test::TempDir;

constexpr int64_t kLayers = 4, kHidden = 64;

// The golden checkpoint built with and without --layer-outputs, fp32 and int4.
struct Builds {
  TempDir dir;
  Builds() {
    auto ckpt = Checkpoint::open(golden_checkpoint());
    for (Precision precision : {Precision::Fp32, Precision::Int4})
      for (bool layers : {false, true}) {
        BuildOptions o;
        o.show_progress = false;
        o.context_length = 256;
        o.precision = precision;
        o.layer_outputs = layers;
        build_model(*ckpt, o, path(precision_name(precision), layers));
      }
  }
  fs::path path(const std::string& precision, bool layers) const {
    return dir / (precision + (layers ? "-layers" : "-plain"));
  }
};
const Builds& builds() {
  static Builds b;
  return b;
}

TEST(LayerOutputs, GraphOutputsTheResidualStreamAfterEveryLayer) {
  const onnx::ModelProto plain = graph::load_model_proto(builds().path("fp32", false) / "model.onnx");
  const onnx::ModelProto layers = graph::load_model_proto(builds().path("fp32", true) / "model.onnx");
  // The same outputs in the same order, then hidden_states.0..N.
  ASSERT_EQ(layers.graph().output_size(), plain.graph().output_size() + kLayers + 1);
  for (int i = 0; i < plain.graph().output_size(); ++i)
    EXPECT_EQ(layers.graph().output(i).name(), plain.graph().output(i).name());
  for (int64_t k = 0; k <= kLayers; ++k) {
    const auto& out = layers.graph().output(plain.graph().output_size() + int(k));
    EXPECT_EQ(out.name(), "hidden_states." + std::to_string(k));
    const auto& shape = out.type().tensor_type().shape();
    ASSERT_EQ(shape.dim_size(), 3);
    EXPECT_EQ(shape.dim(2).dim_value(), kHidden);
  }
  // One Identity per output; the only other changes are the final norm's sum
  // output and the Add that gives the last stream at every position (the
  // final norm reads the logits_to_keep positions only).
  EXPECT_EQ(layers.graph().node_size(), plain.graph().node_size() + kLayers + 2);
  EXPECT_EQ(nodes_of(layers, "Identity").size(), size_t(kLayers + 1));
  EXPECT_EQ(nodes_of(plain, "Identity").size(), 0u);
}

// Every logit of every position, through the runtime.
std::vector<float> logits_of(const fs::path& dir, KernelSet kernels) {
  auto model = Model::load(dir, RuntimeOptions{.intra_op_threads = 1, .kernels = {.set = kernels}});
  Generator gen(*model, 1, 64);
  return gen.forward(test::kGoldenPrompt, true).data;
}

TEST(LayerOutputs, LogitsAreBitIdenticalToABuildWithout) {
  for (const char* precision : {"fp32", "int4"})
    for (KernelSet kernels : {KernelSet::Ort, KernelSet::DeltagenOps, KernelSet::Deltagen}) {
      SCOPED_TRACE(std::string(precision) + measure::kernel_set_label(kernels));
      const std::vector<float> plain = logits_of(builds().path(precision, false), kernels);
      const std::vector<float> layers = logits_of(builds().path(precision, true), kernels);
      ASSERT_EQ(plain.size(), test::kGoldenPrompt.size() * 512);
      EXPECT_TRUE(plain == layers) << "max |diff| " << test::max_abs_diff(plain, layers);
    }
}

TEST(LayerOutputs, StockOrtComputesThemAndTheLastOneFeedsTheFinalNorm) {
  // Straight through ONNX Runtime, no deltagen code at run time.
  test::StepRunner run(builds().path("fp32", true) / "model.onnx");
  const std::vector<float> logits = run.step(test::kGoldenPrompt);
  EXPECT_EQ(logits, test::StepRunner(builds().path("fp32", false) / "model.onnx").step(test::kGoldenPrompt));
  for (int64_t k = 0; k <= kLayers; ++k) {
    const std::vector<float> h = run.output("hidden_states." + std::to_string(k));
    ASSERT_EQ(h.size(), test::kGoldenPrompt.size() * kHidden) << k;
  }
  // hidden_states.0 is the embedding table's rows.
  auto ckpt = Checkpoint::open(golden_checkpoint());
  const std::vector<float> table = ckpt->load_f32("embed_tokens.weight");
  const std::vector<float> h0 = run.output("hidden_states.0");
  for (size_t t = 0; t < test::kGoldenPrompt.size(); ++t)
    for (int64_t i = 0; i < kHidden; ++i)
      ASSERT_EQ(h0[t * kHidden + size_t(i)], table[size_t(test::kGoldenPrompt[t] * kHidden + i)]);
  // hidden_states.N is before the final norm: Qwen3.5's RMSNorm (x / rms * (1 + w))
  // of it, times the tied table, gives the logits.
  ASSERT_TRUE(ckpt->config().tie_word_embeddings);
  const std::vector<float> hn = run.output("hidden_states." + std::to_string(kLayers));
  const std::vector<float> w = ckpt->load_f32("norm.weight");
  const int64_t vocab = int64_t(table.size()) / kHidden;
  double worst = 0;
  for (size_t t = 0; t < test::kGoldenPrompt.size(); ++t) {
    const float* x = hn.data() + t * kHidden;
    double ss = 0;
    for (int64_t i = 0; i < kHidden; ++i) ss += double(x[i]) * x[i];
    const double inv_rms = 1 / std::sqrt(ss / double(kHidden) + ckpt->config().rms_norm_eps);
    for (int64_t v = 0; v < vocab; ++v) {
      double logit = 0;
      for (int64_t i = 0; i < kHidden; ++i) logit += x[i] * inv_rms * (1 + w[size_t(i)]) * table[size_t(v * kHidden + i)];
      worst = std::max(worst, std::abs(logit - logits[t * size_t(vocab) + size_t(v)]));
    }
  }
  EXPECT_LT(worst, 1e-4);
}

TEST(LayerOutputs, GenerationIgnoresThemAndFetchOutputsHandsThemOut) {
  auto model = Model::load(builds().path("fp32", true));
  ASSERT_EQ(model->io().layer_outputs.size(), size_t(kLayers + 1));
  EXPECT_EQ(model->io().layer_outputs.front(), "hidden_states.0");
  EXPECT_EQ(model->io().layer_outputs.back(), "hidden_states.4");
  EXPECT_TRUE(Model::load(builds().path("fp32", false))->io().layer_outputs.empty());

  // The generation loop: the same tokens as the plain build's.
  GenerateOptions go;
  go.max_new_tokens = 16;
  Generator gen(*model);
  auto plain_model = Model::load(builds().path("fp32", false));
  Generator plain(*plain_model);
  EXPECT_EQ(generate_greedy(gen, test::kGoldenPrompt, go).generated_ids, generate_greedy(plain, test::kGoldenPrompt, go).generated_ids);
  EXPECT_EQ(gen.fetched_count(), 0u);  // nothing fetched unless asked
  test::expect_error([&] { gen.fetch_outputs({"hidden_states.0"}); }, "before the first run");

  // Asked: every run hands out [1, S, H] per output, in the order asked.
  Generator fetching(*model, 1, 64);
  test::expect_error([&] { Generator(*model).fetch_outputs({"hidden_states.9"}); }, "has no output hidden_states.9");
  fetching.fetch_outputs(model->io().layer_outputs);
  fetching.forward(std::span(test::kGoldenPrompt).first(5), true);
  ASSERT_EQ(fetching.fetched_count(), size_t(kLayers + 1));
  EXPECT_EQ(tensor_shape(fetching.fetched(0)), (std::vector<int64_t>{1, 5, kHidden}));
  const std::vector<float> prefix_last = tensor_to_f32(fetching.fetched(kLayers));
  fetching.forward(std::span(test::kGoldenPrompt).subspan(5, 1), true);  // a decode step
  EXPECT_EQ(tensor_shape(fetching.fetched(kLayers)), (std::vector<int64_t>{1, 1, kHidden}));

  // The same values as a one-run prefill (states carry between runs).
  Generator whole(*model, 1, 64);
  whole.fetch_outputs(model->io().layer_outputs);
  whole.forward(std::span(test::kGoldenPrompt).first(6), true);
  const std::vector<float> all = tensor_to_f32(whole.fetched(kLayers));
  const std::vector<float> step = tensor_to_f32(fetching.fetched(kLayers));
  EXPECT_LT(test::max_abs_diff(std::vector<float>(all.begin(), all.begin() + 5 * kHidden), prefix_last), 1e-5);
  EXPECT_LT(test::max_abs_diff(std::vector<float>(all.begin() + 5 * kHidden, all.end()), step), 1e-5);
}

TEST(LayerOutputs, CliBuildTakesTheFlagAndInspectListsTheOutputs) {
  TempDir tmp;
  auto b = test::run_cli({"build", "--checkpoint", golden_checkpoint().string(), "--out", (tmp / "m").string(),
                          "--context-length", "64", "--layer-outputs"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto inspect = test::run_cli({"inspect", (tmp / "m").string(), "--json"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("hidden_states.4"), std::string::npos);
}

}  // namespace
}  // namespace deltagen
