// The builder's graph switches, checked on the graphs they produce: Casts
// around RMSNorms (default vs --norm-upcast), the L2 norm forms, rotary
// inside GroupQueryAttention, fused projections, channels-last conv, the
// lm_head / embedding I/O options, tied weights stored once, determinism,
// and `deltagen inspect --diff`. Most use a 24-layer synthetic model of tiny
// widths (18 linear + 6 full-attention layers, like Qwen3.5-0.8B).
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "graph/model_summary.h"
#include "models/build.h"
#include "graph_query.h"
#include "ort_step_runner.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "synth/synth.h"
#include "test_util.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::consumers;
using test::int_attr;
using test::nodes_of;
using test::producers;
using test::StepRunner;
using test::TempDir;

constexpr int64_t kLayers = 24, kLinearLayers = 18, kFullLayers = 6;

// tiny widths, 24 layers, head_dim 64 (rotary 16: GroupQueryAttention can rotate it).
const fs::path& checkpoint24() {
  static TempDir dir;
  static const fs::path ckpt = [] {
    ModelConfig cfg = synth_preset("tiny");
    set_num_layers(cfg, kLayers);
    cfg.head_dim = 64;
    SynthOptions opts;
    opts.seed = 24;
    opts.dtype = DType::F32;
    write_synthetic_checkpoint(cfg, opts, dir / "ck");
    return dir / "ck";
  }();
  return ckpt;
}

// Builds `ckpt` with `opts` into a fresh folder; keeps the folder for the test's lifetime.
class Built {
 public:
  Built(const fs::path& ckpt, BuildOptions opts) {
    opts.context_length = 256;
    build_model(*Checkpoint::open(ckpt), opts, dir_ / "m");
    model_ = graph::load_model_proto(dir_ / "m" / "model.onnx");
  }
  const onnx::ModelProto& model() const { return model_; }
  fs::path dir() const { return dir_ / "m"; }
  fs::path file() const { return dir_ / "m" / "model.onnx"; }
  int64_t count(const std::string& op, const std::string& prefix = "") const {
    return int64_t(nodes_of(model_, op, prefix).size());
  }

 private:
  TempDir dir_;
  onnx::ModelProto model_;
};

BuildOptions fp16() {
  BuildOptions o;
  o.precision = Precision::Fp16;
  return o;
}

bool is_rms_norm(const onnx::NodeProto& n) {
  return n.op_type() == "SimplifiedLayerNormalization" || n.op_type() == "SkipSimplifiedLayerNormalization";
}

std::set<std::string> initializer_names(const onnx::ModelProto& m) {
  std::set<std::string> names;
  for (const auto& t : m.graph().initializer()) names.insert(t.name());
  return names;
}

// Nodes other than the shared Constants (shapes, axes, scalars).
int64_t computing_nodes(const onnx::ModelProto& m) {
  return m.graph().node_size() - int64_t(nodes_of(m, "Constant").size());
}

int elem_type(const onnx::ModelProto& m, const std::string& io_name) {
  for (const auto& vi : m.graph().input())
    if (vi.name() == io_name) return vi.type().tensor_type().elem_type();
  for (const auto& vi : m.graph().output())
    if (vi.name() == io_name) return vi.type().tensor_type().elem_type();
  return -1;
}

// ---- RMSNorm casts ---------------------------------------------------------------------

TEST(BuilderGraph, DefaultFp16HasNoCastTouchingAnyRmsNorm) {
  Built b(checkpoint24(), fp16());
  auto by_output = producers(b.model());
  auto by_input = consumers(b.model());
  int norms = 0;
  for (const auto& n : b.model().graph().node()) {
    if (!is_rms_norm(n)) continue;
    ++norms;
    for (const auto& in : n.input()) {
      auto it = by_output.find(in);
      if (it != by_output.end()) EXPECT_NE(it->second->op_type(), "Cast") << n.name() << " input " << in;
    }
    for (const auto& out : n.output()) {
      auto range = by_input.equal_range(out);
      for (auto it = range.first; it != range.second; ++it)
        EXPECT_NE(it->second->op_type(), "Cast") << n.name() << " output " << out;
    }
  }
  // layer 0 input norm + 47 Skip norms + final + 2 q/k norms per full layer.
  EXPECT_EQ(norms, 1 + 2 * kLayers - 1 + 1 + 2 * kFullLayers);
  // The only Casts: GQA's int32 inputs, and the fp32 island of each linear
  // layer (qkv, a, b in; LinearAttention's output out), whose kernels are float-only.
  EXPECT_EQ(b.count("Cast"), 2 + 4 * kLinearLayers);
}

TEST(BuilderGraph, NormUpcastPutsEveryRmsNormInputAndOutputThroughCasts) {
  BuildOptions o = fp16();
  o.norm_upcast = true;
  Built b(checkpoint24(), o);
  Built plain(checkpoint24(), fp16());
  auto by_output = producers(b.model());
  auto by_input = consumers(b.model());
  const std::set<std::string> weights = initializer_names(b.model());
  int64_t casts_in = 0, casts_out = 0;
  for (const auto& n : b.model().graph().node()) {
    if (!is_rms_norm(n)) continue;
    for (int i = 0; i < n.input_size(); ++i) {
      const std::string& in = n.input(i);
      if (in.empty()) continue;
      if (weights.count(in)) continue;  // the norm weight: fp32 (checked below)
      auto it = by_output.find(in);
      ASSERT_TRUE(it != by_output.end()) << n.name() << " input " << in;
      EXPECT_EQ(it->second->op_type(), "Cast") << n.name() << " input " << in;
      ++casts_in;
    }
    for (const auto& out : n.output()) {
      if (out.empty()) continue;
      auto range = by_input.equal_range(out);
      ASSERT_NE(range.first, range.second) << n.name() << " output " << out << " is unused";
      for (auto it = range.first; it != range.second; ++it)
        EXPECT_EQ(it->second->op_type(), "Cast") << n.name() << " output " << out;
      ++casts_out;
    }
  }
  for (const auto& t : b.model().graph().initializer())
    if (t.name().find("layernorm") != std::string::npos) EXPECT_EQ(t.data_type(), onnx::TensorProto_DataType_FLOAT) << t.name();
  // 47 Skip norms with 2 inputs + 2 outputs, the final one with 2 + 1, layer 0's
  // input norm 1 + 1, 12 q/k norms 1 + 1.
  EXPECT_EQ(casts_in, 108 + 1);
  EXPECT_EQ(casts_out, 108);
  // One Cast serves two inputs (the embedding output feeds layer 0's input norm
  // and, as the residual, its post-attention norm): 216 extra Casts, 108 each
  // way, the number upstream's change removed from its 24-layer fp16 build.
  EXPECT_EQ(b.count("Cast") - plain.count("Cast"), 216);
  std::printf("fp16 24 layers: %lld Casts by default, %lld with --norm-upcast\n", (long long)plain.count("Cast"),
              (long long)b.count("Cast"));
}

TEST(BuilderGraph, NormUpcastChangesNothingInFp32) {
  BuildOptions o;
  o.norm_upcast = true;
  Built up(checkpoint24(), o), plain(checkpoint24(), BuildOptions{});
  // fp32 has nothing to upcast: the switch must leave the graph as it was,
  // byte for byte (nodes, attributes, initializers, inputs and outputs), not
  // merely with as many nodes.
  const onnx::GraphProto &a = up.model().graph(), &b = plain.model().graph();
  ASSERT_EQ(a.node_size(), b.node_size());
  for (int i = 0; i < a.node_size(); ++i)
    ASSERT_EQ(a.node(i).SerializeAsString(), b.node(i).SerializeAsString()) << "node " << i << " " << b.node(i).name();
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
}

// ---- L2 norm ---------------------------------------------------------------------------

TEST(BuilderGraph, DefaultHasTwoLpNormalizationsPerLinearLayer) {
  Built b(checkpoint24(), BuildOptions{});
  for (int64_t i = 0; i < kLayers; ++i) {
    const std::string prefix = "/model/layers." + std::to_string(i) + "/";
    const bool linear = (i + 1) % 4 != 0;
    EXPECT_EQ(b.count("LpNormalization", prefix), linear ? 2 : 0) << prefix;
  }
  EXPECT_EQ(b.count("LpNormalization"), 2 * kLinearLayers);
  EXPECT_EQ(b.count("Sqrt") + b.count("Reciprocal"), 0);
}

TEST(BuilderGraph, DecomposedL2NormIsTheOldSixNodeSubgraph) {
  BuildOptions o;
  o.l2norm = L2Norm::Decomposed;
  Built b(checkpoint24(), o);
  Built lp(checkpoint24(), BuildOptions{});
  EXPECT_EQ(b.count("LpNormalization"), 0);
  for (int64_t i = 0; i < kLayers; ++i) {
    if ((i + 1) % 4 == 0) continue;
    for (const char* which : {"q_norm", "k_norm"}) {
      const std::string prefix = "/model/layers." + std::to_string(i) + "/linear_attn/" + which + "/";
      EXPECT_EQ(b.count("Mul", prefix), 2) << prefix;  // x * x, x * 1/norm
      EXPECT_EQ(b.count("ReduceSum", prefix), 1) << prefix;
      EXPECT_EQ(b.count("Add", prefix), 1) << prefix;  // + 1e-6
      EXPECT_EQ(b.count("Sqrt", prefix), 1) << prefix;
      EXPECT_EQ(b.count("Reciprocal", prefix), 1) << prefix;
    }
  }
  // 6 nodes instead of 1 per norm, 36 norms: +180, the count upstream's change
  // reports (plus 2 shared Constants: eps and the reduce axis).
  EXPECT_EQ(computing_nodes(b.model()) - computing_nodes(lp.model()), 5 * 2 * kLinearLayers);
}

// ---- rotary, fusion, conv layout, gates ----------------------------------------------------

TEST(BuilderGraph, RotaryRunsInsideAttentionWhenItsKernelCanDoIt) {
  Built inside(checkpoint24(), BuildOptions{});
  EXPECT_EQ(inside.count("com.microsoft.RotaryEmbedding"), 0);
  for (const auto* n : nodes_of(inside.model(), "com.microsoft.GroupQueryAttention")) {
    EXPECT_EQ(int_attr(*n, "do_rotary"), 1);
    EXPECT_EQ(n->input_size(), 9);  // + cos_cache, sin_cache
  }
  BuildOptions o;
  o.rotary_in_attention = false;
  Built outside(checkpoint24(), o);
  EXPECT_EQ(outside.count("com.microsoft.RotaryEmbedding"), 2 * kFullLayers);
  // The golden model's rotary part (4 dims) is too narrow for the kernel: explicit nodes stay.
  Built golden(test::golden_checkpoint(), BuildOptions{});
  EXPECT_EQ(golden.count("com.microsoft.RotaryEmbedding"), 2);
}

TEST(BuilderGraph, FusedProjectionsUseOneMatMulPerGroup) {
  Built fused(checkpoint24(), BuildOptions{});
  BuildOptions o;
  o.fuse_projections = false;
  Built separate(checkpoint24(), o);
  // linear layer: in_proj (qkv|z|b|a), out_proj; full: qkv_proj, o_proj; MLP: gate_up, down.
  EXPECT_EQ(fused.count("MatMul", "/model/"), 2 * kLayers + 2 * kLayers);
  EXPECT_EQ(separate.count("MatMul", "/model/"), 5 * kLinearLayers + 4 * kFullLayers + 3 * kLayers);
  EXPECT_EQ(fused.count("MatMul", "/model/layers.0/linear_attn/in_proj/MatMul"), 1);
  EXPECT_EQ(fused.count("MatMul", "/model/layers.3/attn/qkv_proj/MatMul"), 1);
  EXPECT_EQ(fused.count("MatMul", "/model/layers.0/mlp/gate_up_proj/MatMul"), 1);
}

TEST(BuilderGraph, ChannelsLastConvDropsTheTransposesAndKeepsTheStateTransposed) {
  BuildOptions o;
  o.conv_channels_last = true;
  Built last(checkpoint24(), o);
  Built first(checkpoint24(), BuildOptions{});
  EXPECT_EQ(last.count("Transpose"), 0);
  EXPECT_EQ(first.count("Transpose"), 2 * kLinearLayers);
  for (const auto* n : nodes_of(last.model(), "com.microsoft.CausalConvWithState"))
    EXPECT_EQ(int_attr(*n, "channels_last"), 1);
  StepRunner a(last.file()), b(first.file());
  EXPECT_EQ(test::max_abs_diff(a.step(test::kGoldenPrompt), b.step(test::kGoldenPrompt)), 0.0);
  const std::vector<int64_t> cf = b.state_shape("past_key_values.0.conv_state");
  const std::vector<int64_t> cl = a.state_shape("past_key_values.0.conv_state");
  ASSERT_EQ(cf.size(), 3u);
  EXPECT_EQ(cl, (std::vector<int64_t>{1, cf[2], cf[1]}));
  // Same values, transposed.
  std::vector<float> sf = b.state("past_key_values.0.conv_state"), sl = a.state("past_key_values.0.conv_state");
  for (int64_t c = 0; c < cf[1]; ++c)
    for (int64_t k = 0; k < cf[2]; ++k) ASSERT_EQ(sf[size_t(c * cf[2] + k)], sl[size_t(k * cf[1] + c)]);
}

TEST(BuilderGraph, FusedGatesAndGatedNormReplaceTheirSubgraphs) {
  Built fused(checkpoint24(), BuildOptions{});
  BuildOptions o;
  o.linear_attention_gate = false;
  o.gated_rmsnorm = false;
  Built old(checkpoint24(), o);
  EXPECT_EQ(fused.count("com.microsoft.LinearAttentionGate"), kLinearLayers);
  EXPECT_EQ(fused.count("com.microsoft.GatedRMSNorm"), kLinearLayers);
  EXPECT_EQ(old.count("Softplus"), kLinearLayers);
  // Add + Softplus + Mul + Sigmoid -> 1, Reshape + SLN + Reshape + Sigmoid + Mul + Mul -> 1.
  EXPECT_EQ(computing_nodes(old.model()) - computing_nodes(fused.model()), (3 + 5) * kLinearLayers);
}

TEST(BuilderGraph, QScaleMulIsTheOldSeparateMultiply) {
  BuildOptions o;
  o.q_scale_mul = true;
  Built mul(checkpoint24(), o);
  EXPECT_EQ(mul.count("Mul", "/model/layers.0/linear_attn/q_scale/"), 1);
  for (const auto* n : nodes_of(mul.model(), "com.microsoft.LinearAttention"))
    for (const auto& a : n->attribute())
      if (a.name() == "scale") EXPECT_EQ(a.f(), 1.0f);
}

// ---- precisions: dtypes and storage -------------------------------------------------------

TEST(BuilderGraph, StateStaysFp32UnlessAsked) {
  Built b(checkpoint24(), fp16());
  EXPECT_EQ(elem_type(b.model(), "past_key_values.0.recurrent_state"), onnx::TensorProto_DataType_FLOAT);
  EXPECT_EQ(elem_type(b.model(), "present.0.conv_state"), onnx::TensorProto_DataType_FLOAT);
  EXPECT_EQ(elem_type(b.model(), "past_key_values.3.key"), onnx::TensorProto_DataType_FLOAT16);
  EXPECT_EQ(elem_type(b.model(), "logits"), onnx::TensorProto_DataType_FLOAT16);
  BuildOptions o = fp16();
  o.state_dtype = FloatType::Fp16;
  Built s(checkpoint24(), o);
  EXPECT_EQ(elem_type(s.model(), "past_key_values.0.recurrent_state"), onnx::TensorProto_DataType_FLOAT16);
  EXPECT_EQ(elem_type(s.model(), "present.0.conv_state"), onnx::TensorProto_DataType_FLOAT16);
  StepRunner run(s.file());
  run.step(test::kGoldenPrompt);
  run.step({3});  // the fp16 state goes back in
}

TEST(BuilderGraph, Q4F16GraphRunsOnCpuWithFp16Norms) {
  BuildOptions o;
  o.precision = Precision::Int4;
  o.activations = FloatType::Fp16;
  Built b(checkpoint24(), o);
  EXPECT_EQ(b.count("com.microsoft.MatMulNBits"), 4 * kLayers + 1);  // fused groups + lm_head
  EXPECT_EQ(elem_type(b.model(), "logits"), onnx::TensorProto_DataType_FLOAT16);
  for (const auto& t : b.model().graph().initializer())
    if (t.name().find("_scales") != std::string::npos) EXPECT_EQ(t.data_type(), onnx::TensorProto_DataType_FLOAT16);
  EXPECT_EQ(b.count("Cast"), 2 + 4 * kLinearLayers);
  StepRunner run(b.file());
  EXPECT_EQ(run.step(test::kGoldenPrompt).size(), test::kGoldenPrompt.size() * 512);
}

TEST(BuilderGraph, TiedQuantizedTableIsStoredOnceAndGatheredBlockwise) {
  BuildOptions o;
  o.precision = Precision::Int4;
  Built b(checkpoint24(), o);
  auto gbq = nodes_of(b.model(), "com.microsoft.GatherBlockQuantized");
  ASSERT_EQ(gbq.size(), 1u);
  EXPECT_EQ(b.count("Gather", "/model/embed_tokens/"), 0);
  auto head = nodes_of(b.model(), "com.microsoft.MatMulNBits", "/lm_head/");
  ASSERT_EQ(head.size(), 1u);
  EXPECT_EQ(head[0]->output(0), "logits");
  EXPECT_EQ(gbq[0]->input(2), head[0]->input(2));  // the same scales
  int64_t table_like = 0;
  for (const auto& t : b.model().graph().initializer())
    if (t.dims_size() >= 2 && t.dims(0) == 512) ++table_like;  // [vocab, ...]
  EXPECT_EQ(table_like, 2);  // packed codes + scales, nothing else vocab-sized

  o.quantized_embedding_gather = false;
  Built f(checkpoint24(), o);
  EXPECT_EQ(f.count("com.microsoft.GatherBlockQuantized"), 0);
  EXPECT_EQ(f.count("Gather", "/model/embed_tokens/"), 1);
}

TEST(BuilderGraph, UntiedQuantizedEmbeddingIsGatheredFromItsOwnQuantizedTable) {
  TempDir tmp;
  ModelConfig cfg = synth_preset("tiny");
  cfg.tie_word_embeddings = false;
  write_synthetic_checkpoint(cfg, SynthOptions{}, tmp / "ck");
  BuildOptions o;
  o.precision = Precision::Int4;
  Built b(tmp / "ck", o);
  auto gbq = nodes_of(b.model(), "com.microsoft.GatherBlockQuantized");
  ASSERT_EQ(gbq.size(), 1u);
  auto head = nodes_of(b.model(), "com.microsoft.MatMulNBits", "/lm_head/");
  ASSERT_EQ(head.size(), 1u);
  EXPECT_NE(gbq[0]->input(2), head[0]->input(2));  // two tables
  EXPECT_EQ(gbq[0]->input(2), "model.embed_tokens.weight_scales");
  o.quantized_embedding_gather = false;
  Built f(tmp / "ck", o);
  EXPECT_EQ(f.count("Gather", "/model/embed_tokens/"), 1);
}

TEST(BuilderGraph, MixedPrecisionSelectorsKeepChosenLayersWider) {
  BuildOptions o;
  o.precision = Precision::Int4;
  o.lm_head_precision = Precision::Int8;
  o.linear_attn_bits = 8;
  Built b(checkpoint24(), o);
  EXPECT_EQ(b.count("com.microsoft.MatMulNBits", "/lm_head/MatMul_Q8"), 1);
  EXPECT_EQ(b.count("com.microsoft.MatMulNBits", "/model/layers.0/linear_attn/in_proj/MatMul_Q8"), 1);
  EXPECT_EQ(b.count("com.microsoft.MatMulNBits", "/model/layers.0/linear_attn/out_proj/MatMul_Q8"), 1);
  EXPECT_EQ(b.count("com.microsoft.MatMulNBits", "/model/layers.0/mlp/gate_up_proj/MatMul_Q4"), 1);
  for (const auto* n : nodes_of(b.model(), "com.microsoft.GatherBlockQuantized")) EXPECT_EQ(int_attr(*n, "bits"), 8);

  o.lm_head_precision = Precision::Fp32;
  o.linear_attn_bits = 0;
  Built f(checkpoint24(), o);
  EXPECT_EQ(f.count("com.microsoft.FusedMatMul", "/lm_head/"), 1);  // tied fp32 table, stored once
  EXPECT_EQ(f.count("Gather", "/model/embed_tokens/"), 1);
}

// ---- graph I/O options ---------------------------------------------------------------------

TEST(BuilderGraph, PrunedLmHeadGivesTheLastRowOnlyAndTheRuntimeStillGenerates) {
  BuildOptions o;
  o.prune_lm_head = true;
  Built pruned(test::golden_checkpoint(), o);
  Built full(test::golden_checkpoint(), BuildOptions{});
  StepRunner p(pruned.file()), f(full.file());
  std::vector<float> last = p.step(test::kGoldenPrompt), all = f.step(test::kGoldenPrompt);
  EXPECT_EQ(p.last_output_shape(), (std::vector<int64_t>{1, 1, 512}));
  EXPECT_EQ(test::max_abs_diff(last, std::vector<float>(all.end() - 512, all.end())), 0.0);

  // src/runtime's generation loop reads [B, 1, V] logits as the last position.
  auto model = Model::load(pruned.dir());
  Generator gen(*model);
  GenerateOptions go;
  go.max_new_tokens = 16;
  GenerateResult got = generate_greedy(gen, test::kGoldenPrompt, go);
  const std::vector<int64_t> golden = {77, 490, 490, 381, 381, 381, 381, 381, 349, 349, 349, 349, 313, 313, 313, 313};
  EXPECT_EQ(got.generated_ids, golden);
}

TEST(BuilderGraph, ExcludedEmbeddingsTakeInputsEmbeds) {
  BuildOptions o;
  o.exclude_embeds = true;
  Built b(test::golden_checkpoint(), o);
  EXPECT_EQ(elem_type(b.model(), "inputs_embeds"), onnx::TensorProto_DataType_FLOAT);
  EXPECT_EQ(elem_type(b.model(), "input_ids"), -1);
  auto ckpt = Checkpoint::open(test::golden_checkpoint());
  std::vector<float> table = ckpt->load_f32("embed_tokens.weight"), embeds;
  for (int64_t id : test::kGoldenPrompt) embeds.insert(embeds.end(), table.begin() + id * 64, table.begin() + (id + 1) * 64);
  Built full(test::golden_checkpoint(), BuildOptions{});
  EXPECT_LT(test::max_abs_diff(StepRunner(b.file()).step(test::kGoldenPrompt, embeds), StepRunner(full.file()).step(test::kGoldenPrompt)),
            1e-6);
}

TEST(BuilderGraph, ExcludedLmHeadOutputsHiddenStates) {
  BuildOptions o;
  o.exclude_lm_head = true;
  Built b(test::golden_checkpoint(), o);
  EXPECT_EQ(elem_type(b.model(), "hidden_states"), onnx::TensorProto_DataType_FLOAT);
  EXPECT_EQ(elem_type(b.model(), "logits"), -1);
  StepRunner run(b.file());
  std::vector<float> hidden = run.step(test::kGoldenPrompt);
  ASSERT_EQ(run.last_output_shape(), (std::vector<int64_t>{1, int64_t(test::kGoldenPrompt.size()), 64}));
  // hidden_states times the tied embedding table = the full model's logits.
  std::vector<float> table = Checkpoint::open(test::golden_checkpoint())->load_f32("embed_tokens.weight");
  std::vector<float> logits;
  for (size_t t = 0; t < test::kGoldenPrompt.size(); ++t)
    for (int64_t v = 0; v < 512; ++v) {
      double s = 0;
      for (int64_t h = 0; h < 64; ++h) s += double(hidden[t * 64 + size_t(h)]) * table[size_t(v * 64 + h)];
      logits.push_back(float(s));
    }
  Built full(test::golden_checkpoint(), BuildOptions{});
  EXPECT_LT(test::max_abs_diff(logits, StepRunner(full.file()).step(test::kGoldenPrompt)), 1e-5);
}

// ---- files -----------------------------------------------------------------------------

TEST(BuilderGraph, QuantizedBuildIsDeterministicForAnyThreadCount) {
  TempDir tmp;
  auto ckpt = Checkpoint::open(checkpoint24());
  BuildOptions o;
  o.precision = Precision::Int4;
  o.external_data_threshold = 0;  // exercise the data file too
  o.threads = 1;
  build_model(*ckpt, o, tmp / "a");
  o.threads = 2;
  build_model(*ckpt, o, tmp / "b");
  build_model(*ckpt, o, tmp / "c");
  for (const char* f : {"model.onnx", "model.onnx.data", "genai_config.json"}) {
    SCOPED_TRACE(f);
    const std::string a = test::read_text(tmp / "a" / f);
    EXPECT_FALSE(a.empty());
    EXPECT_TRUE(a == test::read_text(tmp / "b" / f));
    EXPECT_TRUE(a == test::read_text(tmp / "c" / f));
  }
  StepRunner run(tmp / "a" / "model.onnx");
  EXPECT_EQ(run.step(test::kGoldenPrompt).size(), test::kGoldenPrompt.size() * 512);
}

// ---- options and CLI -------------------------------------------------------------------------

TEST(BuilderGraph, ImpossibleOptionsAreRejectedBeforeAnyFile) {
  auto rejects = [](std::function<void(BuildOptions&)> f) {
    BuildOptions o;
    f(o);
    EXPECT_THROW(validate_build_options(normalized_build_options(o)), Error);
  };
  rejects([](auto& o) { o.precision = Precision::Int4; o.block_size = 24; });
  rejects([](auto& o) { o.precision = Precision::Int4; o.accuracy_level = 5; });
  rejects([](auto& o) { o.activations = FloatType::Fp16; });  // fp32 weights compute in fp32
  rejects([](auto& o) { o.linear_attn_bits = 8; });  // not a quantized build
  rejects([](auto& o) { o.lm_head_precision = Precision::Fp16; o.block_size = 16; });  // nothing quantized
  rejects([](auto& o) { o.exclude_lm_head = o.prune_lm_head = true; });
}

TEST(BuilderGraph, CliBuildTakesEveryFlagAndInspectDiffsTwoModels) {
  TempDir tmp;
  const std::string ck = test::golden_checkpoint().string();
  auto a = test::run_cli({"build", "--checkpoint", ck, "--out", (tmp / "a").string(), "--context-length", "64"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  auto b = test::run_cli({"build", "--checkpoint", ck, "--out", (tmp / "b").string(), "--context-length", "64",
                          "--precision", "int4", "--activations", "fp16", "--block-size", "16", "--asymmetric",
                          "--accuracy-level", "0", "--keep-lm-head", "int8", "--linear-attn-bits", "8",
                          "--state-dtype", "fp16", "--norm-upcast", "--l2norm", "decomposed", "--q-scale-mul",
                          "--conv-channels-last", "--no-rotary-in-attention", "--no-fuse-projections",
                          "--no-linear-attention-gate", "--no-gated-rmsnorm", "--prune-lm-head", "--threads", "1"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  StepRunner run(tmp / "b" / "model.onnx");  // every old form and option at once still loads and runs
  run.step(test::kGoldenPrompt);
  EXPECT_EQ(run.last_output_shape(), (std::vector<int64_t>{1, 1, 512}));
  run.step({3});

  auto text = test::run_cli({"inspect", (tmp / "a").string(), "--diff", (tmp / "b").string()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("com.microsoft.MatMulNBits"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("weight bytes"), std::string::npos);

  auto js = test::run_cli({"inspect", (tmp / "a").string(), "--diff", (tmp / "b").string(), "--json"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  auto j = nlohmann::json::parse(js.out);
  const auto sa = graph::summarize_model(tmp / "a"), sb = graph::summarize_model(tmp / "b");
  EXPECT_EQ(j["nodes"]["a"], sa.node_count);
  EXPECT_EQ(j["nodes"]["b"], sb.node_count);
  EXPECT_EQ(j["nodes"]["delta"], sb.node_count - sa.node_count);
  EXPECT_EQ(j["op_counts"]["LpNormalization"]["delta"], -6);
  EXPECT_EQ(j["op_counts"]["com.microsoft.MatMulNBits"]["a"], 0);
  EXPECT_EQ(j["weight_bytes"]["a"], sa.weight_bytes());
  int64_t delta_sum = 0;
  for (auto& [op, c] : j["op_counts"].items()) delta_sum += c["delta"].get<int64_t>();
  EXPECT_EQ(delta_sum, j["nodes"]["delta"].get<int64_t>());

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--l2norm", "rsqrt"}, {"--block-size", "24", "--precision", "int4"},
        {"--embedding-gather", "maybe"}, {"--precision", "int3"}, {"--state-dtype", "fp8"},
        {"--activations", "int4", "--precision", "int4"}, {"--keep-lm-head", "fp64"}, {"--exact-l2norm-eps"}}) {
    std::vector<std::string> args = {"build", "--checkpoint", ck, "--out", (tmp / "bad").string()};
    args.insert(args.end(), bad.begin(), bad.end());
    auto r = test::run_cli(args);
    EXPECT_NE(r.exit_code, 0) << bad[0];
    EXPECT_NE(r.err.find(bad[0]), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(tmp / "bad"));
  }
}

}  // namespace
}  // namespace deltagen
