// The fp32 ONNX builder and `deltagen inspect`: graph structure of the golden
// checkpoint's model, file layout (inline / external data, determinism,
// atomic output), CLI failures, and the logits ONNX Runtime computes with it
// against the golden Hugging Face outputs.
#include <gtest/gtest.h>

#include <onnxruntime_cxx_api.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "graph/model_summary.h"
#include "models/build.h"
#include "reference/qwen35_reference.h"
#include "synth/synth.h"
#include "graph_query.h"
#include "ort_step_runner.h"
#include "runtime_fixtures.h"
#include "test_util.h"
#include "deltagen/error.h"
#include "util/npy.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::golden_checkpoint;
using test::golden_file;
using test::TempDir;

constexpr double kLogitTolerance = 1e-4;

using test::golden_model_dir;  // one fp32 build of the golden checkpoint per process

const onnx::ModelProto& golden_model() {
  static const onnx::ModelProto model = graph::load_model_proto(golden_model_dir() / "model.onnx");
  return model;
}

using test::nodes_of;
using test::producers;

std::string shape_text(const graph::TensorSummary& t) {
  std::string s = t.name + " " + t.dtype + " [";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? "," : "") + t.shape[i];
  return s + "]";
}

// ---- graph structure ------------------------------------------------------------

TEST(Builder, GoldenGraphHasExpectedIo) {
  graph::ModelSummary s = graph::summarize(golden_model(), golden_model_dir() / "model.onnx");
  std::vector<std::string> inputs, outputs;
  for (const auto& t : s.inputs) inputs.push_back(shape_text(t));
  for (const auto& t : s.outputs) outputs.push_back(shape_text(t));
  std::vector<std::string> want_in = {
      "input_ids int64 [batch_size,sequence_length]",
      "attention_mask int64 [batch_size,total_sequence_length]",
      "position_ids int64 [batch_size,sequence_length]",
      "logits_to_keep int64 [1]",  // an input with a default: 0, every position
  };
  std::vector<std::string> want_out = {"logits float32 [batch_size,logits_length,512]"};
  for (int layer : {0, 1, 2}) {
    const std::string n = std::to_string(layer);
    want_in.push_back("past_key_values." + n + ".conv_state float32 [batch_size,128,3]");
    want_in.push_back("past_key_values." + n + ".recurrent_state float32 [batch_size,4,16,16]");
    want_out.push_back("present." + n + ".conv_state float32 [batch_size,128,3]");
    want_out.push_back("present." + n + ".recurrent_state float32 [batch_size,4,16,16]");
  }
  want_in.push_back("past_key_values.3.key float32 [batch_size,2,past_sequence_length,16]");
  want_in.push_back("past_key_values.3.value float32 [batch_size,2,past_sequence_length,16]");
  want_out.push_back("present.3.key float32 [batch_size,2,total_sequence_length,16]");
  want_out.push_back("present.3.value float32 [batch_size,2,total_sequence_length,16]");
  EXPECT_EQ(inputs, want_in);
  EXPECT_EQ(outputs, want_out);
  EXPECT_EQ(s.ir_version, 10);
  EXPECT_EQ(s.opsets, (std::map<std::string, int64_t>{{"", 21}, {"com.microsoft", 1}}));
}

TEST(Builder, TwoLpNormalizationsPerLinearLayerAndNoneElsewhere) {
  const auto& m = golden_model();
  for (int layer = 0; layer < 4; ++layer) {
    const std::string prefix = "/model/layers." + std::to_string(layer) + "/";
    SCOPED_TRACE(prefix);
    const bool linear = layer != 3;
    EXPECT_EQ(nodes_of(m, "LpNormalization", prefix).size(), linear ? 2u : 0u);
    EXPECT_EQ(nodes_of(m, "com.microsoft.LinearAttention", prefix).size(), linear ? 1u : 0u);
    EXPECT_EQ(nodes_of(m, "com.microsoft.CausalConvWithState", prefix).size(), linear ? 1u : 0u);
    EXPECT_EQ(nodes_of(m, "com.microsoft.GroupQueryAttention", prefix).size(), linear ? 0u : 1u);
  }
  EXPECT_EQ(nodes_of(m, "LpNormalization").size(), 6u);
  for (const auto* n : nodes_of(m, "LpNormalization")) {
    std::map<std::string, int64_t> attrs;
    for (const auto& a : n->attribute()) attrs[a.name()] = a.i();
    EXPECT_EQ(attrs["p"], 2);
    EXPECT_EQ(attrs["axis"], -1);
  }
  // The old 5-node L2 norm (Mul, ReduceSum, Add, Rsqrt, Mul) must be gone.
  EXPECT_TRUE(nodes_of(m, "Rsqrt").empty());
  EXPECT_EQ(nodes_of(m, "ReduceSum").size(), 1u);  // attention_mask -> seqlens_k only
}

TEST(Builder, NormsUseOrtDomainsAndHaveNoCasts) {
  const auto& m = golden_model();
  // Layer 0's input norm and the q/k norms: default domain (ORT rejects com.microsoft).
  EXPECT_EQ(nodes_of(m, "SimplifiedLayerNormalization").size(), 1u + 2u);
  // The gated norms of the 3 linear-attention layers: one fused node each.
  EXPECT_EQ(nodes_of(m, "com.microsoft.GatedRMSNorm").size(), 3u);
  EXPECT_TRUE(nodes_of(m, "com.microsoft.SimplifiedLayerNormalization").empty());
  // 3 more input norms, 4 post-attention norms, the final norm.
  EXPECT_EQ(nodes_of(m, "com.microsoft.SkipSimplifiedLayerNormalization").size(), 8u);
  // fp32: the only Casts turn attention_mask into GQA's int32 inputs.
  for (const auto* n : nodes_of(m, "Cast"))
    EXPECT_EQ(n->name().rfind("/model/attn_mask_reformat/", 0), 0u) << n->name();
  auto by_output = producers(m);
  for (const auto& n : m.graph().node()) {
    if (n.op_type() != "SimplifiedLayerNormalization" && n.op_type() != "SkipSimplifiedLayerNormalization" &&
        n.op_type() != "GatedRMSNorm")
      continue;
    for (const auto& in : n.input()) {
      auto it = by_output.find(in);
      if (it != by_output.end()) EXPECT_NE(it->second->op_type(), "Cast") << n.name();
    }
  }
}

TEST(Builder, NodeNamesAreHierarchicalAndUnique) {
  const auto& m = golden_model();
  std::set<std::string> names, graph_outputs;
  for (const auto& o : m.graph().output()) graph_outputs.insert(o.name());
  for (const auto& n : m.graph().node()) {
    EXPECT_TRUE(names.insert(n.name()).second) << "duplicate " << n.name();
    const bool hierarchical = n.name().rfind("/model/", 0) == 0 || n.name().rfind("/lm_head/", 0) == 0;
    EXPECT_TRUE(hierarchical) << n.name();
    for (int i = 0; i < n.output_size(); ++i) {
      const std::string& o = n.output(i);
      if (o.empty() || graph_outputs.count(o)) continue;
      EXPECT_EQ(o, n.name() + "/output_" + std::to_string(i));
    }
  }
  // Fused projections (the default) are named after the group.
  EXPECT_EQ(nodes_of(m, "MatMul", "/model/layers.3/attn/qkv_proj/MatMul").size(), 1u);
  EXPECT_EQ(nodes_of(m, "MatMul", "/model/layers.0/linear_attn/in_proj/MatMul").size(), 1u);
  EXPECT_EQ(nodes_of(m, "MatMul", "/model/layers.0/mlp/gate_up_proj/MatMul").size(), 1u);
  EXPECT_EQ(nodes_of(m, "Constant", "/model/constants/").size(), nodes_of(m, "Constant").size());
}

TEST(Builder, TiedEmbeddingIsStoredOnce) {
  const auto& m = golden_model();
  int64_t embed_like = 0;
  for (const auto& t : m.graph().initializer())
    if (t.dims_size() == 2 && t.dims(0) * t.dims(1) == 512 * 64) ++embed_like;
  EXPECT_EQ(embed_like, 1);
  auto head = nodes_of(m, "com.microsoft.FusedMatMul", "/lm_head/");
  ASSERT_EQ(head.size(), 1u);
  EXPECT_EQ(head[0]->input(1), "model.embed_tokens.weight");
  EXPECT_EQ(head[0]->output(0), "logits");
}

TEST(Builder, WritesGenaiConfig) {
  auto j = nlohmann::json::parse(test::read_text(golden_model_dir() / "genai_config.json"));
  const auto& model = j.at("model");
  EXPECT_EQ(model.at("type"), "qwen3_5_text");
  EXPECT_EQ(model.at("context_length"), 4096);
  EXPECT_EQ(model.at("eos_token_id"), 511);
  EXPECT_EQ(model.at("vocab_size"), 512);
  const auto& dec = model.at("decoder");
  EXPECT_EQ(dec.at("filename"), "model.onnx");
  EXPECT_EQ(dec.at("head_size"), 16);
  EXPECT_EQ(dec.at("hidden_size"), 64);
  EXPECT_EQ(dec.at("num_attention_heads"), 4);
  EXPECT_EQ(dec.at("num_hidden_layers"), 4);
  EXPECT_EQ(dec.at("num_key_value_heads"), 2);
  EXPECT_EQ(dec.at("inputs").at("past_key_names"), "past_key_values.%d.key");
  EXPECT_EQ(dec.at("outputs").at("present_value_names"), "present.%d.value");
  EXPECT_EQ(j.at("search").at("max_length"), 4096);
  EXPECT_EQ(j.at("search").at("past_present_share_buffer"), true);
}

// ---- files ----------------------------------------------------------------------

TEST(Builder, OutputIsDeterministic) {
  TempDir tmp;
  auto ckpt = Checkpoint::open(golden_checkpoint());
  build_model(*ckpt, BuildOptions{}, tmp / "a");
  build_model(*ckpt, BuildOptions{}, tmp / "b");
  for (const char* f : {"model.onnx", "genai_config.json"}) {
    SCOPED_TRACE(f);
    std::string a = test::read_text(tmp / "a" / f), b = test::read_text(tmp / "b" / f);
    EXPECT_FALSE(a.empty());
    EXPECT_TRUE(a == b);
  }
}

TEST(Builder, SmallModelIsInlineByDefault) {
  EXPECT_FALSE(fs::exists(golden_model_dir() / "model.onnx.data"));
  graph::ModelSummary s = graph::summarize_model(golden_model_dir());
  EXPECT_EQ(s.external_bytes, 0);
  EXPECT_GT(s.inline_bytes, 800000);
}

TEST(Builder, ContextLengthOptionSizesTheRotaryCache) {
  TempDir tmp;
  auto ckpt = Checkpoint::open(golden_checkpoint());
  BuildOptions opts;
  opts.context_length = 256;
  BuildReport r = build_model(*ckpt, opts, tmp / "m");
  EXPECT_EQ(r.context_length, 256);
  auto model = graph::load_model_proto(tmp / "m" / "model.onnx");
  bool found = false;
  for (const auto& t : model.graph().initializer())
    if (t.name() == "model.rotary_emb.cos_cache") {
      found = true;
      EXPECT_EQ(t.dims(0), 256);
      EXPECT_EQ(t.dims(1), 2);  // rotary_dim 4 / 2
    }
  EXPECT_TRUE(found);
  auto j = nlohmann::json::parse(test::read_text(tmp / "m" / "genai_config.json"));
  EXPECT_EQ(j["model"]["context_length"], 256);
}

TEST(Builder, CopiesTokenizerFiles) {
  TempDir tmp;
  fs::create_directories(tmp / "ck");
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(golden_checkpoint() / f, tmp / "ck" / f);
  { std::ofstream(tmp / "ck" / "tokenizer.json") << "{\"fake\": true}"; }
  auto ckpt = Checkpoint::open(tmp / "ck");
  build_model(*ckpt, BuildOptions{}, tmp / "m");
  EXPECT_EQ(test::read_text(tmp / "m" / "tokenizer.json"), "{\"fake\": true}");
}

// ---- ONNX Runtime ---------------------------------------------------------------

using test::StepRunner;

std::vector<float> golden_rows(const std::string& file) { return read_npy(golden_file(file)).as_f32(); }

TEST(Builder, PrefillLogitsMatchGolden) {
  StepRunner run(golden_model_dir() / "model.onnx");
  std::vector<float> logits = run.step(test::kGoldenPrompt);
  std::vector<float> want = golden_rows("logits_prefill.npy");
  double diff = test::max_abs_diff(logits, want);
  std::printf("max |logit diff| prefill vs golden: %.3g\n", diff);
  EXPECT_LT(diff, kLogitTolerance);
}

TEST(Builder, PrefillThenDecodeMatchesGolden) {
  StepRunner run(golden_model_dir() / "model.onnx");
  std::vector<float> logits = run.step(std::vector<int64_t>(test::kGoldenPrompt.begin(), test::kGoldenPrompt.begin() + 7));
  for (size_t t = 7; t < test::kGoldenPrompt.size(); ++t) {
    std::vector<float> row = run.step({test::kGoldenPrompt[t]});
    logits.insert(logits.end(), row.begin(), row.end());
  }
  double diff = test::max_abs_diff(logits, golden_rows("logits_prefill7_decode5.npy"));
  std::printf("max |logit diff| prefill 7 + decode 5 vs golden: %.3g\n", diff);
  EXPECT_LT(diff, kLogitTolerance);
}

// With HF's l2norm eps kept, only fp32 rounding separates the graph from the
// golden logits (without it the eps omission dominates, ~9e-5 on tiny-a).
TEST(Builder, ExactL2NormEpsMatchesGoldenTightly) {
  TempDir tmp;
  auto ckpt = Checkpoint::open(golden_checkpoint());
  BuildOptions opts;
  opts.l2norm = L2Norm::LpNormEps;
  build_model(*ckpt, opts, tmp / "m");
  auto model = graph::load_model_proto(tmp / "m" / "model.onnx");
  EXPECT_EQ(nodes_of(model, "LpNormalization").size(), 6u);
  EXPECT_EQ(nodes_of(model, "Pad").size(), 6u);

  StepRunner run(tmp / "m" / "model.onnx");
  double diff = test::max_abs_diff(run.step(test::kGoldenPrompt), golden_rows("logits_prefill.npy"));
  std::printf("max |logit diff| prefill (exact l2norm eps) vs golden: %.3g\n", diff);
  EXPECT_LT(diff, 2e-5);
}

TEST(Builder, Layer0StatesMatchGolden) {
  StepRunner run(golden_model_dir() / "model.onnx");
  run.step(test::kGoldenPrompt);
  // The reference keeps K = 4 conv columns, ORT the newest K-1 = 3.
  NpyArray conv = read_npy(golden_file("layer0_conv_state_after_prefill12.npy"));
  ASSERT_EQ(conv.shape, (std::vector<int64_t>{1, 128, 4}));
  std::vector<float> conv_all = conv.as_f32(), conv_last3;
  for (int64_t c = 0; c < 128; ++c)
    for (int64_t j = 1; j < 4; ++j) conv_last3.push_back(conv_all[size_t(c * 4 + j)]);
  EXPECT_EQ(run.state_shape("past_key_values.0.conv_state"), (std::vector<int64_t>{1, 128, 3}));
  EXPECT_LT(test::max_abs_diff(run.state("past_key_values.0.conv_state"), conv_last3), 1e-5);

  EXPECT_EQ(run.state_shape("past_key_values.0.recurrent_state"), (std::vector<int64_t>{1, 4, 16, 16}));
  EXPECT_LT(test::max_abs_diff(run.state("past_key_values.0.recurrent_state"),
                               golden_rows("layer0_recurrent_state_after_prefill12.npy")),
            1e-4);
}

TEST(Builder, ExternalDataSwitchWritesAlignedDataFileThatRuns) {
  TempDir tmp;
  auto ckpt = Checkpoint::open(golden_checkpoint());
  BuildOptions opts;
  opts.external_data_threshold = 0;
  BuildReport r = build_model(*ckpt, opts, tmp / "m");
  EXPECT_TRUE(r.external_data);
  ASSERT_TRUE(fs::exists(tmp / "m" / "model.onnx.data"));
  EXPECT_LT(fs::file_size(tmp / "m" / "model.onnx"), 100000u);  // the graph only

  auto model = graph::load_model_proto(tmp / "m" / "model.onnx");
  for (const auto& t : model.graph().initializer()) {
    ASSERT_EQ(t.data_location(), onnx::TensorProto_DataLocation_EXTERNAL) << t.name();
    for (const auto& e : t.external_data())
      if (e.key() == "offset") EXPECT_EQ(std::stoll(e.value()) % 4096, 0) << t.name();
  }
  graph::ModelSummary s = graph::summarize_model(tmp / "m");
  EXPECT_EQ(s.inline_bytes, 0);
  EXPECT_EQ(s.external_bytes, r.weight_bytes);

  StepRunner run(tmp / "m" / "model.onnx");
  EXPECT_LT(test::max_abs_diff(run.step(test::kGoldenPrompt), golden_rows("logits_prefill.npy")), kLogitTolerance);
}

// Other shapes than the golden set's: untied lm_head, two full-attention
// layers, 4:1 GQA, nv == nk, head_dim 32 (rotary_dim 8), text-only layout;
// checked against the float64 reference forward pass, prefill then decode.
TEST(Builder, UntiedVariantMatchesReference) {
  TempDir tmp;
  ModelConfig cfg = synth_preset("tiny");
  set_num_layers(cfg, 8);
  cfg.tie_word_embeddings = false;
  cfg.model_type = "qwen3_5_text";
  cfg.num_attention_heads = 4;
  cfg.num_key_value_heads = 1;
  cfg.head_dim = 32;
  cfg.linear_num_key_heads = cfg.linear_num_value_heads = 2;
  cfg.linear_key_head_dim = cfg.linear_value_head_dim = 32;
  SynthOptions synth;
  synth.seed = 7;
  synth.dtype = DType::F32;
  synth.vl_layout = false;
  write_synthetic_checkpoint(cfg, synth, tmp / "ck");

  auto ckpt = Checkpoint::open(tmp / "ck");
  BuildOptions opts;
  opts.l2norm = L2Norm::LpNormEps;  // compare the rest of the math tightly
  build_model(*ckpt, opts, tmp / "m");
  auto model = graph::load_model_proto(tmp / "m" / "model.onnx");
  EXPECT_EQ(nodes_of(model, "MatMul", "/lm_head/MatMul").size(), 1u);
  EXPECT_TRUE(nodes_of(model, "com.microsoft.FusedMatMul").empty());
  EXPECT_EQ(nodes_of(model, "com.microsoft.GroupQueryAttention").size(), 2u);

  ReferenceModel ref(*ckpt);
  ReferenceState ref_state = ref.new_state();
  StepRunner run(tmp / "m" / "model.onnx");
  const std::vector<int64_t> prompt = {3, 141, 59, 26, 53, 58, 97, 93, 238};
  std::vector<std::vector<int64_t>> steps = {prompt, {46}, {264}, {33}};
  for (const auto& ids : steps) {
    Matrix64 want = ref.forward(ids, ref_state);
    std::vector<float> got = run.step(ids);
    double diff = test::max_abs_diff(got, want.data);
    SCOPED_TRACE("step of " + std::to_string(ids.size()) + " tokens: max |diff| " + std::to_string(diff));
    EXPECT_LT(diff, 5e-5);  // measured 1.4e-5
  }
}

// ---- CLI ------------------------------------------------------------------------

bool one_line_error(const test::CliResult& r) {
  return r.exit_code != 0 && r.err.rfind("error: ", 0) == 0 && r.err.find('\n') == r.err.size() - 1;
}

// Nothing named after `target` (no folder, no ".name.partial-*" leftovers).
bool nothing_left(const fs::path& target) {
  for (const auto& e : fs::directory_iterator(target.parent_path()))
    if (e.path().filename().string().find(target.filename().string()) != std::string::npos) return false;
  return true;
}

TEST(Builder, CliBuildsAndInspects) {
  TempDir tmp;
  auto r = test::run_cli({"build", "--checkpoint", golden_checkpoint().string(), "--out", (tmp / "m").string(),
                          "--precision", "fp32", "--context-length", "512"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp / "m" / "model.onnx"));

  auto text = test::run_cli({"inspect", (tmp / "m").string()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("nodes: "), std::string::npos);
  EXPECT_NE(text.out.find("com.microsoft.LinearAttention"), std::string::npos);
  EXPECT_NE(text.out.find("LpNormalization"), std::string::npos);
  EXPECT_NE(text.out.find("past_key_values.0.conv_state float32 [batch_size, 128, 3]"), std::string::npos);
  EXPECT_NE(text.out.find("initializers: "), std::string::npos);

  auto js = test::run_cli({"inspect", (tmp / "m" / "model.onnx").string(), "--json"});
  ASSERT_EQ(js.exit_code, 0) << js.err;
  auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j["op_counts"]["LpNormalization"], 6);
  EXPECT_EQ(j["op_counts"]["com.microsoft.GroupQueryAttention"], 1);
  int64_t total = 0;
  for (auto& [op, n] : j["op_counts"].items()) total += n.get<int64_t>();
  EXPECT_EQ(j["nodes"], total);
  EXPECT_EQ(j["inputs"].size(), 12u);  // with logits_to_keep
  EXPECT_EQ(j["outputs"].size(), 9u);
  EXPECT_EQ(j["weight_bytes"]["external"], 0);
  EXPECT_GT(j["weight_bytes"]["inline"].get<int64_t>(), 0);
}

TEST(Builder, CliBuildFailsCleanlyOnMissingCheckpoint) {
  TempDir tmp;
  auto r = test::run_cli(
      {"build", "--checkpoint", (tmp / "nope").string(), "--out", (tmp / "built_model").string()});
  EXPECT_TRUE(one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("nope"), std::string::npos) << r.err;
  EXPECT_TRUE(nothing_left(tmp / "built_model"));
}

TEST(Builder, CliBuildFailsCleanlyOnUnknownPrecision) {
  TempDir tmp;
  auto r = test::run_cli({"build", "--checkpoint", golden_checkpoint().string(), "--out",
                          (tmp / "built_model").string(),
                          "--precision", "fp12"});
  EXPECT_TRUE(one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("fp12"), std::string::npos) << r.err;
  EXPECT_TRUE(nothing_left(tmp / "built_model"));
}

TEST(Builder, CliBuildRejectsUnknownFlag) {
  TempDir tmp;
  auto r = test::run_cli({"build", "--checkpoint", golden_checkpoint().string(), "--out",
                          (tmp / "built_model").string(),
                          "--precison", "fp32"});
  EXPECT_TRUE(one_line_error(r)) << r.err;
  EXPECT_TRUE(nothing_left(tmp / "built_model"));
}

TEST(Builder, CliInspectFailsCleanlyOnGarbage) {
  TempDir tmp;
  { std::ofstream(tmp / "garbage.onnx") << "this is not a protobuf \xff\xff\xff\xff"; }
  auto r = test::run_cli({"inspect", (tmp / "garbage.onnx").string()});
  EXPECT_TRUE(one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("garbage.onnx"), std::string::npos) << r.err;

  auto missing = test::run_cli({"inspect", (tmp / "absent").string()});
  EXPECT_TRUE(one_line_error(missing)) << missing.err;
  EXPECT_NE(missing.err.find("absent"), std::string::npos);
}

TEST(Builder, InspectReportsMissingExternalData) {
  TempDir tmp;
  auto ckpt = Checkpoint::open(golden_checkpoint());
  BuildOptions opts;
  opts.external_data_threshold = 0;
  build_model(*ckpt, opts, tmp / "m");
  fs::remove(tmp / "m" / "model.onnx.data");
  auto r = test::run_cli({"inspect", (tmp / "m").string()});
  EXPECT_TRUE(one_line_error(r)) << r.err;
  EXPECT_NE(r.err.find("model.onnx.data"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace deltagen
