// Qwen3.5-MoE (shared/golden/moe/tiny-moe-a): the float64 reference's MoE
// block, the built graph on stock ONNX Runtime and through deltagen's
// runtime against the golden outputs (logits, router choices, greedy
// tokens, chunked prefill, snapshots); round trips of other MoE shapes
// (untied, per-expert layout, bf16 weights, top-1, top-E) against the
// reference; quantized experts; and the bad-checkpoint errors. Every expected
// value comes from the golden files or the reference.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "broken_checkpoints.h"
#include "checkpoint/checkpoint.h"
#include "deltagen/deltagen.h"
#include "graph/onnx_writer.h"
#include "graph_query.h"
#include "measure/graph_facts.h"
#include "models/build.h"
#include "models/expert_weights.h"
#include "quant/block_quant.h"
#include "reference/qwen35_ops.h"
#include "ort_step_runner.h"
#include "reference/qwen35_reference.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "synth/synth.h"
#include "test_util.h"
#include "util/npy.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::max_abs_diff;
using test::moe_golden_checkpoint;
using test::moe_golden_file;

constexpr double kGoldenTol = 1e-4;  // the golden README's bound for a float32 implementation
constexpr double kRef64Tol = 1e-10;  // float64 against the golden set's own float64 pass

nlohmann::json summary() {
  std::ifstream in(moe_golden_file("summary.json"));
  return nlohmann::json::parse(in);
}
std::vector<double> golden(const std::string& name) { return read_npy(moe_golden_file(name)).as_f64(); }
std::vector<int64_t> golden_ids(const std::string& name) { return read_npy(moe_golden_file(name)).as_i64(); }

class MoeReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ckpt_ = Checkpoint::open(moe_golden_checkpoint());
    model_ = std::make_unique<ReferenceModel>(*ckpt_);
    prompt_ = summary().at("prompt_ids").get<std::vector<int64_t>>();
  }
  static void TearDownTestSuite() {
    model_.reset();
    ckpt_.reset();
  }
  static std::unique_ptr<Checkpoint> ckpt_;
  static std::unique_ptr<ReferenceModel> model_;
  static std::vector<int64_t> prompt_;
};
std::unique_ptr<Checkpoint> MoeReference::ckpt_;
std::unique_ptr<ReferenceModel> MoeReference::model_;
std::vector<int64_t> MoeReference::prompt_;

TEST_F(MoeReference, ConfigIsMoe) {
  const ModelConfig& c = ckpt_->config();
  EXPECT_EQ(c.model_type, "qwen3_5_moe");
  EXPECT_TRUE(c.is_moe());
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_per_tok, 2);
  EXPECT_EQ(c.moe_intermediate_size, 32);
  EXPECT_EQ(c.shared_expert_intermediate_size, 48);
  EXPECT_EQ(ckpt_->expert_layout(), ExpertLayout::Fused);
}

TEST_F(MoeReference, PrefillLogitsMatchGolden) {
  ReferenceState state = model_->new_state();
  Matrix64 logits = model_->forward(prompt_, state);
  EXPECT_LT(max_abs_diff(logits.data, golden("logits_prefill.npy")), kGoldenTol);
  EXPECT_LT(max_abs_diff(logits.data, golden("ref64_logits_prefill.npy")), kRef64Tol);
}

TEST_F(MoeReference, RouterChoicesMatchGolden) {
  ReferenceState state = model_->new_state();
  ReferenceTrace trace;
  model_->forward(prompt_, state, &trace);
  ASSERT_EQ(trace.routing.size(), 4u);
  EXPECT_LT(max_abs_diff(trace.routing[0].logits.data, golden("router_logits_layer0.npy")), kGoldenTol);
  EXPECT_EQ(trace.routing[0].experts, golden_ids("router_topk_layer0.npy"));
  EXPECT_LT(max_abs_diff(trace.routing[0].weights, golden("router_topk_weights_layer0.npy")), 1e-6);
  std::vector<int64_t> every_layer;
  for (const RouterTrace& r : trace.routing) every_layer.insert(every_layer.end(), r.experts.begin(), r.experts.end());
  EXPECT_EQ(every_layer, golden_ids("router_topk_prefill.npy"));
}

TEST_F(MoeReference, ChunkedPrefillThenDecodeMatchesGolden) {
  const int64_t split = summary().at("prefill_split").get<int64_t>();
  ReferenceState state = model_->new_state();
  std::vector<double> rows;
  Matrix64 first = model_->forward({prompt_.begin(), prompt_.begin() + split}, state);
  rows.insert(rows.end(), first.data.begin(), first.data.end());
  for (size_t t = size_t(split); t < prompt_.size(); ++t) {
    Matrix64 step = model_->forward({prompt_[t]}, state);
    rows.insert(rows.end(), step.data.begin(), step.data.end());
  }
  EXPECT_LT(max_abs_diff(rows, golden("logits_prefill7_decode5.npy")), kGoldenTol);
}

TEST_F(MoeReference, GreedyTokensAndStepLogitsMatchGolden) {
  const std::vector<int64_t> want = summary().at("greedy_new_tokens").get<std::vector<int64_t>>();
  GreedyResult r = reference_greedy(*model_, prompt_, int64_t(want.size()));
  EXPECT_EQ(r.generated, want);
  const std::vector<double> steps = golden("greedy_step_logits.npy");
  const int64_t V = model_->config().vocab_size, P = int64_t(prompt_.size());
  ASSERT_EQ(int64_t(steps.size()) % V, 0);
  const int64_t n = int64_t(steps.size()) / V;  // one row per greedy step
  std::vector<double> got(r.logits.row(P - 1), r.logits.row(P - 1) + n * V);
  EXPECT_LT(max_abs_diff(got, steps), kGoldenTol);
}

// ---- the built graph --------------------------------------------------------------

// tiny-moe-a built with `opts` into a folder that lives as long as the process.
fs::path built(const BuildOptions& opts, const std::string& tag) {
  static test::TempDir dir;
  const fs::path out = dir / tag;
  if (!fs::exists(out)) build_model(*Checkpoint::open(moe_golden_checkpoint()), opts, out);
  return out;
}
fs::path fp32_model() { return built(BuildOptions{}, "fp32"); }

std::vector<float> golden_f32(const std::string& name) { return read_npy(moe_golden_file(name)).as_f32(); }

TEST(MoeGraph, RoutedExpertsAreOneMoeNodePerLayer) {
  const onnx::ModelProto model = graph::load_model_proto(fp32_model() / "model.onnx");
  const auto moe = test::nodes_of(model, "com.microsoft.MoE");
  ASSERT_EQ(moe.size(), 4u);
  EXPECT_EQ(moe[0]->name(), "/model/layers.0/moe/experts/MoE");
  // The shared expert is ordinary nodes, its gate a Sigmoid.
  EXPECT_EQ(test::nodes_of(model, "Sigmoid", "/model/layers.0/moe/shared_expert_gate/Sigmoid").size(), 1u);
}

TEST(MoeGraph, StockOrtReproducesGoldenLogitsAndGreedyTokens) {
  const std::vector<int64_t> prompt = summary().at("prompt_ids").get<std::vector<int64_t>>();
  {
    test::StepRunner run(fp32_model() / "model.onnx");
    EXPECT_LT(max_abs_diff(run.step(prompt), golden_f32("logits_prefill.npy")), kGoldenTol);
  }
  {
    test::StepRunner run(fp32_model() / "model.onnx");
    std::vector<float> rows = run.step({prompt.begin(), prompt.begin() + 7});
    for (size_t t = 7; t < prompt.size(); ++t) {
      std::vector<float> r = run.step({prompt[t]});
      rows.insert(rows.end(), r.begin(), r.end());
    }
    EXPECT_LT(max_abs_diff(rows, golden_f32("logits_prefill7_decode5.npy")), kGoldenTol);
  }
  test::StepRunner run(fp32_model() / "model.onnx");
  EXPECT_EQ(run.greedy(prompt, 16), summary().at("greedy_new_tokens").get<std::vector<int64_t>>());
}

// A decode step reads k of E experts: bench's bytes-per-step counts only those.
TEST(MoeGraph, DecodeReadsOnlyTheActiveExperts) {
  const ModelConfig cfg = Checkpoint::open(moe_golden_checkpoint())->config();
  BuildOptions int4;
  int4.precision = Precision::Int4;
  for (const fs::path& model : {fp32_model(), built(int4, "int4")}) {
    const measure::GraphFacts f = measure::graph_facts(model);
    // fp32 experts: 4 layers x E x (2I x H + H x I) floats; int4: their codes and scales.
    if (model == fp32_model())
      EXPECT_EQ(f.expert_bytes, cfg.num_hidden_layers * cfg.num_experts * 3 * cfg.moe_intermediate_size *
                                    cfg.hidden_size * 4);
    EXPECT_GT(f.expert_bytes, 0);
    EXPECT_EQ(f.active_expert_bytes, f.expert_bytes * cfg.num_experts_per_tok / cfg.num_experts);
    EXPECT_EQ(f.decode_read_bytes(), f.weight_bytes - f.row_indexed_bytes - f.expert_bytes + f.active_expert_bytes);
    // The weight counts: a token reads every weight but the E - k experts its
    // router skips (the tied table is the lm_head, read whole).
    const double experts = double(cfg.num_hidden_layers * cfg.num_experts * 3 * cfg.moe_intermediate_size *
                                  cfg.hidden_size);
    const double skipped = experts * double(cfg.num_experts - cfg.num_experts_per_tok) / double(cfg.num_experts);
    EXPECT_EQ(f.stored.weights - f.read_per_token.weights, skipped) << model;
  }
}

// deltagen's runtime, with its own kernels (the default) and with ONNX Runtime's.
class MoeRuntime : public ::testing::TestWithParam<KernelSet> {
 protected:
  std::unique_ptr<Model> load() const {
    RuntimeOptions o{.intra_op_threads = 1};
    o.kernels.set = GetParam();
    return Model::load(fp32_model(), o);
  }
  std::vector<int64_t> prompt_ = summary().at("prompt_ids").get<std::vector<int64_t>>();
};

TEST_P(MoeRuntime, GreedyTokensAndStepLogitsMatchGolden) {
  auto model = load();
  Generator gen(*model);
  GenerateOptions opts;
  opts.max_new_tokens = 16;
  opts.collect_logits = true;
  GenerateResult r = generate_greedy(gen, prompt_, opts);
  EXPECT_EQ(r.generated_ids, summary().at("greedy_new_tokens").get<std::vector<int64_t>>());
  const int64_t V = 512, P = int64_t(prompt_.size());
  std::vector<float> steps(r.logits.begin() + (P - 1) * V, r.logits.begin() + (P + 15) * V);
  EXPECT_LT(max_abs_diff(steps, golden_f32("greedy_step_logits.npy")), kGoldenTol);
}

TEST_P(MoeRuntime, PromptInChunksOf1And3And12GivesPrefillLogits) {
  auto model = load();
  for (size_t chunk : {1, 3, 12}) {
    Generator gen(*model);
    std::vector<float> rows;
    for (size_t b = 0; b < prompt_.size(); b += chunk) {
      Logits l = gen.forward(std::span<const int64_t>(prompt_).subspan(b, std::min(chunk, prompt_.size() - b)), true);
      rows.insert(rows.end(), l.data.begin(), l.data.end());
    }
    EXPECT_LT(max_abs_diff(rows, golden_f32("logits_prefill.npy")), kGoldenTol) << "chunk " << chunk;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, MoeRuntime, ::testing::Values(KernelSet::Deltagen, KernelSet::Ort),
                         [](const auto& info) { return std::string(info.param == KernelSet::Ort ? "Ort" : "Deltagen"); });

TEST(MoeRuntimeSnapshot, RestoringContinuesExactlyAsTheFirstTime) {
  auto engine = Engine::load(fp32_model(), EngineOptions{.threads = 1});
  Conversation c(engine);
  GenerationOptions o;
  o.max_new_tokens = 8;
  o.stop_at_eos = false;
  o.collect_logits = true;
  o.sampling.temperature = 0.9;
  o.sampling.seed = 5;
  c.generate(summary().at("prompt_ids").get<std::vector<int64_t>>(), o);
  const Snapshot snapshot = c.snapshot();
  const GenerationResult a = c.generate(std::vector<int64_t>{}, o);
  c.restore(snapshot);
  const GenerationResult b = c.generate(std::vector<int64_t>{}, o);
  EXPECT_EQ(a.generated_ids, b.generated_ids);
  EXPECT_TRUE(a.logits == b.logits);
}

// ---- other shapes: the graph against the reference ---------------------------------

struct MoeShape {
  const char* name;
  std::function<void(ModelConfig&, SynthOptions&)> change;
};

class MoeRoundTrip : public ::testing::TestWithParam<MoeShape> {};

TEST_P(MoeRoundTrip, GraphMatchesReference) {
  test::TempDir tmp;
  ModelConfig cfg = synth_preset("tiny-moe");
  SynthOptions synth;
  synth.seed = 11;
  synth.dtype = DType::F32;
  GetParam().change(cfg, synth);
  write_synthetic_checkpoint(cfg, synth, tmp / "ck");
  auto ckpt = Checkpoint::open(tmp / "ck");
  build_model(*ckpt, BuildOptions{}, tmp / "m");

  ReferenceModel ref(*ckpt);
  ReferenceState state = ref.new_state();
  test::StepRunner run(tmp / "m" / "model.onnx");
  const std::vector<std::vector<int64_t>> steps = {{3, 141, 59, 26, 53, 58, 97, 93, 238}, {46}, {264}};
  for (const auto& ids : steps) {
    const Matrix64 want = ref.forward(ids, state);
    EXPECT_LT(max_abs_diff(run.step(ids), want.data), kGoldenTol) << ids.size() << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MoeRoundTrip,
    ::testing::Values(
        MoeShape{"untied", [](ModelConfig& c, SynthOptions&) { c.tie_word_embeddings = false; }},
        MoeShape{"per_expert_layout", [](ModelConfig&, SynthOptions& s) { s.expert_layout = ExpertLayout::PerExpert; }},
        MoeShape{"bf16_weights", [](ModelConfig&, SynthOptions& s) { s.dtype = DType::BF16; }},
        MoeShape{"text_layout", [](ModelConfig& c, SynthOptions& s) {
                   s.vl_layout = false;
                   c.model_type = "qwen3_5_moe_text";
                 }},
        MoeShape{"top1", [](ModelConfig& c, SynthOptions&) { c.num_experts_per_tok = 1; }},
        MoeShape{"top_all", [](ModelConfig& c, SynthOptions&) { c.num_experts_per_tok = c.num_experts; }}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MoeCheckpoint, PerExpertLayoutReadsTheSameExperts) {
  test::TempDir tmp;
  ModelConfig cfg = synth_preset("tiny-moe");
  SynthOptions fused, split;
  fused.dtype = split.dtype = DType::F32;
  split.expert_layout = ExpertLayout::PerExpert;
  write_synthetic_checkpoint(cfg, fused, tmp / "fused");
  write_synthetic_checkpoint(cfg, split, tmp / "split");
  auto a = Checkpoint::open(tmp / "fused"), b = Checkpoint::open(tmp / "split");
  EXPECT_EQ(a->expert_layout(), ExpertLayout::Fused);
  EXPECT_EQ(b->expert_layout(), ExpertLayout::PerExpert);
  // synth draws each tensor from its own stream, so only the shapes and the
  // slicing can be compared: expert 3's up rows are the second half of its fused rows.
  const ExpertMatrix up = a->expert_matrix(2, 3, ExpertPart::Up);
  const ExpertMatrix gate = a->expert_matrix(2, 3, ExpertPart::Gate);
  EXPECT_EQ(up.rows, cfg.moe_intermediate_size);
  EXPECT_EQ(up.cols, cfg.hidden_size);
  EXPECT_EQ(up.data - gate.data, cfg.moe_intermediate_size * cfg.hidden_size * 4);
  const ExpertMatrix down = b->expert_matrix(2, 3, ExpertPart::Down);
  EXPECT_EQ(down.tensor, "layers.2.mlp.experts.3.down_proj.weight");
  EXPECT_EQ(down.rows, cfg.hidden_size);
}

// ---- quantized and low-precision builds -------------------------------------------------

// An initializer's bytes, produced once; `copy` hands them to a graph.
std::vector<uint8_t> bytes_of(const graph::Initializer& init) {
  const graph::WeightBuffer w = init.produce();
  return std::vector<uint8_t>(w.bytes(), w.bytes() + w.size());
}
graph::Initializer copy(graph::Initializer init, std::vector<uint8_t> bytes) {
  init.produce = [bytes]() { return graph::WeightBuffer(bytes); };
  return init;
}
std::vector<float> as_floats(const std::vector<uint8_t>& b) {
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), b.size());
  return f;
}

// One QMoE node as the builder writes it, with layer 0's experts of
// tiny-moe-a quantized by expert_quantized_weight, against the MoE math in
// float64 on the dequantized weights: the packing, the gate/up interleave,
// the scales' layout and the routing, apart from the rest of the model (whose
// int4/int8 rounding a random-weight model of this size amplifies to whole
// logits: its greedy tokens part from the golden ones after a few steps).
TEST(MoeGraph, QMoeNodeComputesTheDequantizedExperts) {
  auto ckpt = Checkpoint::open(moe_golden_checkpoint());
  const ModelConfig& c = ckpt->config();
  const int64_t T = 5, H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size, K = c.num_experts_per_tok;
  std::vector<float> x(size_t(T * H)), logits(size_t(T * E));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.7 * double(i)));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(2.0 * std::cos(1.3 * double(i)));

  for (int bits : {4, 8}) {
    SCOPED_TRACE("int" + std::to_string(bits));
    quant::BlockFormat f;
    f.bits = bits;
    f.block_size = 16;
    QuantizedWeight fc1 = expert_quantized_weight(*ckpt, 0, ExpertFc::Fc1GateUp, "fc1", f, graph::kFloat, 1);
    QuantizedWeight fc2 = expert_quantized_weight(*ckpt, 0, ExpertFc::Fc2Down, "fc2", f, graph::kFloat, 1);
    ASSERT_EQ(fc1.packed.dims, (std::vector<int64_t>{E, 2 * I, H * bits / 8}));
    ASSERT_EQ(fc2.scales.dims, (std::vector<int64_t>{E, H, I / 16}));
    const std::vector<uint8_t> p1 = bytes_of(fc1.packed), s1 = bytes_of(fc1.scales);
    const std::vector<uint8_t> p2 = bytes_of(fc2.packed), s2 = bytes_of(fc2.scales);
    auto dequantized = [&](const std::vector<uint8_t>& packed, const std::vector<uint8_t>& scales, int64_t rows,
                           int64_t cols) {
      quant::QuantizedMatrix m;
      m.rows = rows;
      m.cols = cols;
      m.format = f;
      m.packed = packed;
      m.scales = as_floats(scales);
      return quant::dequantize_matrix(m);
    };
    const std::vector<float> w1 = dequantized(p1, s1, E * 2 * I, H), w2 = dequantized(p2, s2, E * H, I);

    std::vector<double> want(size_t(T * H), 0.0);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> p(logits.begin() + t * E, logits.begin() + (t + 1) * E);
      ref::softmax(p.data(), E);
      std::vector<int64_t> order(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) order[size_t(e)] = e;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[size_t(a)] > p[size_t(b)]; });
      double sum = 0;
      for (int64_t j = 0; j < K; ++j) sum += p[size_t(order[size_t(j)])];
      for (int64_t j = 0; j < K; ++j) {
        const int64_t e = order[size_t(j)];
        std::vector<double> h(static_cast<size_t>(I));
        for (int64_t r = 0; r < I; ++r) {  // rows interleaved: gate r = 2r, up r = 2r + 1
          double g = 0, u = 0;
          for (int64_t k = 0; k < H; ++k) {
            g += double(w1[size_t(((e * 2 * I) + 2 * r) * H + k)]) * x[size_t(t * H + k)];
            u += double(w1[size_t(((e * 2 * I) + 2 * r + 1) * H + k)]) * x[size_t(t * H + k)];
          }
          h[size_t(r)] = ref::silu(g) * u;
        }
        for (int64_t o = 0; o < H; ++o) {
          double y = 0;
          for (int64_t r = 0; r < I; ++r) y += double(w2[size_t((e * H + o) * I + r)]) * h[size_t(r)];
          want[size_t(t * H + o)] += p[size_t(e)] / sum * y;
        }
      }
    }

    test::TempDir tmp;
    graph::GraphBuilder b("qmoe");
    b.input("x", graph::kFloat, {T, H});
    b.input("router", graph::kFloat, {T, E});
    const std::vector<std::string> inputs = {"x", "router", b.initializer(copy(fc1.packed, p1)),
                                             b.initializer(copy(fc1.scales, s1)), "",
                                             b.initializer(copy(fc2.packed, p2)), b.initializer(copy(fc2.scales, s2))};
    b.node("QMoE", "/qmoe", inputs,
           {graph::attr("k", K), graph::attr("activation_type", "swiglu"), graph::attr("swiglu_fusion", int64_t(1)),
            graph::attr("normalize_routing_weights", int64_t(1)), graph::attr("activation_alpha", 1.0f),
            graph::attr("activation_beta", 0.0f), graph::attr("expert_weight_bits", int64_t(bits)),
            graph::attr("block_size", f.block_size)},
           graph::kMsDomain, 1, {"y"});
    b.output("y", graph::kFloat, {T, H});
    graph::write_model(graph::make_model(b, {{"", 21}, {graph::kMsDomain, 1}}, 10, "moe_test"), b.take_initializers(),
                       tmp / "m.onnx", graph::WriteOptions{});
    Ort::Session session(test::ort_test_env(), (tmp / "m.onnx").c_str(), Ort::SessionOptions{});
    auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    const std::vector<int64_t> xs = {T, H}, ls = {T, E};
    Ort::Value in[2] = {Ort::Value::CreateTensor<float>(mem, x.data(), x.size(), xs.data(), 2),
                        Ort::Value::CreateTensor<float>(mem, logits.data(), logits.size(), ls.data(), 2)};
    const char* in_names[] = {"x", "router"};
    const char* out_names[] = {"y"};
    auto out = session.Run(Ort::RunOptions{}, in_names, in, 2, out_names, 1);
    const std::vector<float> got = test::to_f32(out[0]);
    const double diff = max_abs_diff(got, want);
    std::printf("[ measured ] QMoE int%d node vs float64 on its dequantized experts: max |diff| %.3g\n", bits, diff);
    EXPECT_LT(diff, 1e-4);
  }
}

// Mean over positions of the largest |logit difference| of a build against the reference.
double prefill_error(const fs::path& model, const std::vector<int64_t>& prompt) {
  test::StepRunner run(model / "model.onnx");
  const std::vector<float> got = run.step(prompt);
  const std::vector<double> want = golden("ref64_logits_prefill.npy");
  return max_abs_diff(got, want);
}

TEST(MoeGraph, EveryPrecisionBuildsAndRuns) {
  const std::vector<int64_t> prompt = summary().at("prompt_ids").get<std::vector<int64_t>>();
  struct Case {
    Precision precision;
    std::optional<FloatType> activations;
    double bound;
  };
  // Whole-model errors of this random tiny model (every projection rounded,
  // amplified through 4 layers; measured int8 1.27, int4 2.86, fp16 0.024,
  // bf16 0.79 against the float64 logits): bounds at about twice those, so a
  // build that stops running or computes garbage fails; the experts' own math
  // is checked tightly by QMoeNodeComputesTheDequantizedExperts.
  for (const Case& c : {Case{Precision::Int8, {}, 2.5}, Case{Precision::Int4, {}, 6.0},
                        Case{Precision::Int4, FloatType::Fp16, 6.0}, Case{Precision::Int4, FloatType::Bf16, 6.0},
                        Case{Precision::Fp16, {}, 0.05}, Case{Precision::Bf16, {}, 1.6}}) {
    const std::string tag = std::string(precision_name(c.precision)) +
                            (c.activations ? std::string("-") + float_type_name(*c.activations) : "");
    SCOPED_TRACE(tag);
    BuildOptions opts;
    opts.precision = c.precision;
    opts.activations = c.activations;
    const fs::path model = built(opts, tag);
    const onnx::ModelProto proto = graph::load_model_proto(model / "model.onnx");
    const bool quantized = is_quantized(c.precision);
    EXPECT_EQ(test::nodes_of(proto, "com.microsoft.QMoE").size(), quantized ? 4u : 0u);
    EXPECT_EQ(test::nodes_of(proto, "com.microsoft.MoE").size(), quantized ? 0u : 4u);
    const double err = prefill_error(model, prompt);
    std::printf("[ measured ] %s prefill max |logit diff| vs float64 reference: %.4g\n", tag.c_str(), err);
    EXPECT_LT(err, c.bound);
  }
}

// ---- bad checkpoints ----------------------------------------------------------------

void copy_moe_golden(const fs::path& dir) {
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::copy_file(moe_golden_checkpoint() / f, dir / f);
    fs::permissions(dir / f, fs::perms::owner_write, fs::perm_options::add);
  }
}

std::string open_error(const std::function<void(const fs::path&)>& damage) {
  test::TempDir tmp;
  copy_moe_golden(tmp / "ck");
  damage(tmp / "ck");
  return test::error_message([&] { Checkpoint::open(tmp / "ck"); });
}

void edit_config(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  auto j = test::read_json(dir / "config.json");
  edit(j["text_config"]);
  test::write_text(dir / "config.json", j.dump());
}

TEST(MoeCheckpoint, BadInputIsAOneLineErrorNamingFileAndTensor) {
  std::string e = open_error([](const fs::path& d) { edit_config(d, [](auto& t) { t["num_experts"] = 6; }); });
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("layers.0.mlp.gate.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[6,64]"), std::string::npos) << e;

  e = open_error([](const fs::path& d) { edit_config(d, [](auto& t) { t["num_experts_per_tok"] = 9; }); });
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("'text_config.num_experts_per_tok' is 9, more than num_experts (8)"), std::string::npos) << e;

  e = open_error([](const fs::path& d) { edit_config(d, [](auto& t) { t["norm_topk_prob"] = false; }); });
  EXPECT_NE(e.find("norm_topk_prob"), std::string::npos) << e;

  e = open_error([](const fs::path& d) { edit_config(d, [](auto& t) { t.erase("moe_intermediate_size"); }); });
  EXPECT_NE(e.find("missing key 'text_config.moe_intermediate_size'"), std::string::npos) << e;

  e = open_error([](const fs::path& d) {
    test::edit_header(d / "model.safetensors", [](nlohmann::json& h) {
      h.erase("model.language_model.layers.2.mlp.shared_expert.up_proj.weight");
    });
  });
  EXPECT_NE(e.find("tensor layers.2.mlp.shared_expert.up_proj.weight is missing"), std::string::npos) << e;

  e = open_error([](const fs::path& d) {
    test::edit_header(d / "model.safetensors", [](nlohmann::json& h) {
      h["model.language_model.layers.1.mlp.experts.down_proj"]["shape"] = {8, 32, 64};
    });
  });
  EXPECT_NE(e.find("layers.1.mlp.experts.down_proj has shape [8,32,64] but config.json implies [8,64,32]"),
            std::string::npos)
      << e;
  for (const std::string& msg : {e}) EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(MoeCheckpoint, PerExpertCheckpointWithAnExtraExpertIsRefused) {
  test::TempDir tmp;
  ModelConfig cfg = synth_preset("tiny-moe");
  SynthOptions synth;
  synth.dtype = DType::F32;
  synth.expert_layout = ExpertLayout::PerExpert;
  write_synthetic_checkpoint(cfg, synth, tmp / "ck");
  edit_config(tmp / "ck", [](auto& t) { t["num_experts"] = 7; });
  const std::string e = test::error_message([&] { Checkpoint::open(tmp / "ck"); });
  EXPECT_NE(e.find("tensor layers.0.mlp.experts.7.gate_proj.weight is expert 7, but config.json has num_experts 7"),
            std::string::npos)
      << e;
}

// The mixed plan measures Linear sites only: a budget that would leave the
// experts out is refused before anything slow (gptq alone fits the shared
// expert and keeps the routed experts rtn).
TEST(MoeCheckpoint, BitsBudgetIsRefused) {
  test::TempDir tmp;
  test::write_text(tmp / "cal.txt", std::string(4000, 'a'));
  BuildOptions opts;
  opts.precision = Precision::Int4;
  opts.quant_method = quant::QuantMethod::Gptq;
  opts.calibration = tmp / "cal.txt";
  opts.bits_budget = 5;
  const std::string e = test::error_message(
      [&] { build_model(*Checkpoint::open(moe_golden_checkpoint()), opts, tmp / "m"); });
  EXPECT_NE(e.find("--bits-budget: is not supported for mixture-of-experts"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(tmp / "m"));
}

TEST(MoeSynthCli, PresetsAndShapeFlags) {
  test::TempDir tmp;
  test::CliResult r = test::run_cli({"synth", "--preset", "tiny-moe", "--out", (tmp / "a").string(), "--experts", "4",
                                     "--top-k", "4", "--expert-layout", "per-expert", "--dtype", "f32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ck = Checkpoint::open(tmp / "a");
  EXPECT_EQ(ck->config().num_experts, 4);
  EXPECT_EQ(ck->config().num_experts_per_tok, 4);
  EXPECT_EQ(ck->expert_layout(), ExpertLayout::PerExpert);

  struct Bad { std::vector<std::string> args; std::string phrase; };
  for (const Bad& b : {Bad{{"--preset", "tiny-moe", "--top-k", "9"}, "--top-k: must be between 1 and"},
                       Bad{{"--preset", "tiny", "--experts", "4"}, "--experts: needs a mixture-of-experts preset"},
                       Bad{{"--preset", "tiny-moe", "--expert-layout", "split"}, "unknown layout 'split'"},
                       Bad{{"--preset", "36b"}, "unknown preset '36b'"}}) {
    std::vector<std::string> args = {"synth", "--out", (tmp / "bad").string()};
    args.insert(args.end(), b.args.begin(), b.args.end());
    const test::CliResult bad = test::run_cli(args);
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find(b.phrase), std::string::npos) << bad.err;
    EXPECT_FALSE(fs::exists(tmp / "bad"));
  }
}

// The real shapes: 35B-A3B's config (and tensor list) as published, cut to 4 layers.
TEST(MoeSynth, ThirtyFiveBShapes) {
  ModelConfig cfg = synth_preset("35b-a3b");
  EXPECT_EQ(cfg.num_hidden_layers, 40);
  EXPECT_EQ(cfg.num_full_layers(), 10);
  set_num_layers(cfg, 4);
  const auto specs = qwen35_tensor_specs(cfg);
  auto shape_of = [&](const std::string& n) {
    for (const auto& s : specs)
      if (s.name == n) return s.shape;
    return std::vector<int64_t>{};
  };
  EXPECT_EQ(shape_of("layers.0.mlp.experts.gate_up_proj"), (std::vector<int64_t>{256, 1024, 2048}));
  EXPECT_EQ(shape_of("layers.3.mlp.experts.down_proj"), (std::vector<int64_t>{256, 2048, 512}));
  EXPECT_EQ(shape_of("layers.3.mlp.shared_expert_gate.weight"), (std::vector<int64_t>{1, 2048}));
  EXPECT_EQ(shape_of("lm_head.weight"), (std::vector<int64_t>{248320, 2048}));
  const nlohmann::json j = config_to_json(cfg, true);
  EXPECT_EQ(j.at("model_type"), "qwen3_5_moe");
  EXPECT_EQ(parse_config(j, "synth").num_experts_per_tok, 8);
  EXPECT_EQ(synth_preset("397b-a17b").num_experts, 512);
  EXPECT_EQ(synth_preset("122b-a10b").moe_intermediate_size, 1024);
}

}  // namespace
}  // namespace deltagen
