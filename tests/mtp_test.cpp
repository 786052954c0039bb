// The multi-token-prediction head (mtp.*, docs/speculative.md): its config
// key, its tensors in a checkpoint (synth writes them, open checks them), the
// float64 reference of its forward pass, and mtp.onnx (the builder), run by
// ONNX Runtime against the reference.
//
// The reference: one call over many slots equals slot by slot (its own KV
// cache), and a pass-through head gives the model's own logits (its wiring).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"  // SafetensorsFile
#include "deltagen/error.h"
#include "models/build.h"
#include "ort_step_runner.h"
#include "reference/qwen35_reference.h"
#include "synth/synth.h"
#include "test_util.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::expect_error;
using test::TempDir;

// The tiny preset (the golden shapes), untied, with a head; fp32.
ModelConfig tiny_with_head() {
  ModelConfig c = synth_preset("tiny");
  c.tie_word_embeddings = false;
  c.mtp_num_hidden_layers = 1;
  return c;
}

fs::path write_tiny(const fs::path& dir, const ModelConfig& c, uint64_t seed = 5) {
  SynthOptions o;
  o.seed = seed;
  o.dtype = DType::F32;
  write_synthetic_checkpoint(c, o, dir);
  return dir;
}

nlohmann::json read_config(const fs::path& dir) { return nlohmann::json::parse(test::read_text(dir / "config.json")); }

void write_config(const fs::path& dir, const nlohmann::json& j) { std::ofstream(dir / "config.json") << j.dump(2); }

// ---- config and checkpoint -----------------------------------------------------------

TEST(MtpConfig, TheKeyRoundTripsAndBadValuesAreNamed) {
  ModelConfig c = tiny_with_head();
  nlohmann::json j = config_to_json(c, /*vl_layout=*/true);
  EXPECT_EQ(j["text_config"]["mtp_num_hidden_layers"], 1);
  EXPECT_EQ(parse_config(j, "config.json").mtp_num_hidden_layers, 1);
  // Qwen3-Next's name for it.
  j["text_config"].erase("mtp_num_hidden_layers");
  j["text_config"]["num_nextn_predict_layers"] = 1;
  EXPECT_EQ(parse_config(j, "config.json").mtp_num_hidden_layers, 1);
  j["text_config"]["num_nextn_predict_layers"] = -1;
  expect_error([&] { parse_config(j, "config.json"); }, "'text_config.num_nextn_predict_layers' must be a non-negative");
  j["text_config"].erase("num_nextn_predict_layers");
  EXPECT_EQ(parse_config(j, "config.json").mtp_num_hidden_layers, 0);  // absent: no head
}

TEST(MtpCheckpoint, SynthWritesTheHeadAtTheTopLevelAndOpenChecksIt) {
  TempDir tmp;
  const fs::path dir = write_tiny(tmp / "ck", tiny_with_head());
  // Stored as released: "mtp.fc.weight", not under model.language_model.
  const SafetensorsFile file(dir / "model.safetensors");
  EXPECT_EQ(file.tensors().count("mtp.fc.weight"), 1u);
  EXPECT_EQ(file.tensors().count("mtp.layers.0.self_attn.q_proj.weight"), 1u);
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck->has_mtp());
  const int64_t H = ck->config().hidden_size;
  EXPECT_EQ(ck->info("mtp.fc.weight").shape, (std::vector<int64_t>{H, 2 * H}));
  EXPECT_EQ(ck->info("mtp.layers.0.self_attn.q_proj.weight").shape,
            (std::vector<int64_t>{2 * ck->config().num_attention_heads * ck->config().head_dim, H}));
  EXPECT_EQ(ck->info("mtp.norm.weight").shape, (std::vector<int64_t>{H}));
  // 3 + 11 (one gated full-attention layer with a dense MLP) + 1.
  EXPECT_EQ(qwen35_mtp_tensor_specs(ck->config()).size(), 15u);
}

TEST(MtpCheckpoint, ADeclaredHeadWithoutTensorsIsNoHeadAndAMissingLayerIsNamed) {
  TempDir tmp;
  ModelConfig plain = tiny_with_head();
  plain.mtp_num_hidden_layers = 0;
  const fs::path dir = write_tiny(tmp / "plain", plain);
  nlohmann::json j = read_config(dir);
  j["text_config"]["mtp_num_hidden_layers"] = 1;  // as re-quantized uploads say, without mtp.*
  write_config(dir, j);
  EXPECT_FALSE(Checkpoint::open(dir)->has_mtp());

  const fs::path head = write_tiny(tmp / "head", tiny_with_head());
  j = read_config(head);
  j["text_config"]["mtp_num_hidden_layers"] = 2;
  write_config(head, j);
  expect_error([&] { Checkpoint::open(head); }, "tensor mtp.layers.1.input_layernorm.weight is missing");
}

// ---- the float64 reference -------------------------------------------------------------

TEST(MtpReference, SlotsInOneCallEqualSlotsOneByOne) {
  TempDir tmp;
  auto ck = Checkpoint::open(write_tiny(tmp / "ck", tiny_with_head()));
  const ReferenceModel model(*ck);
  ASSERT_TRUE(model.has_mtp());
  const std::vector<int64_t> prompt = {5, 17, 300, 42, 7, 99, 123, 256};
  ReferenceState state = model.new_state();
  ReferenceTrace trace;
  model.forward(prompt, state, &trace);
  const Matrix64 hidden = model.final_norm(trace.hidden.back());  // [P][H], post final norm
  const std::vector<int64_t> next(prompt.begin() + 1, prompt.end());  // slot i reads token i + 1
  Matrix64 h(int64_t(next.size()), hidden.cols);
  std::copy(hidden.data.begin(), hidden.data.begin() + int64_t(h.data.size()), h.data.begin());

  ReferenceMtpState whole = model.new_mtp_state();
  Matrix64 hm_whole;
  const Matrix64 all = model.mtp_forward(next, h, whole, &hm_whole);
  ASSERT_EQ(all.rows, int64_t(next.size()));
  ASSERT_EQ(all.cols, model.config().vocab_size);
  EXPECT_EQ(whole.position, int64_t(next.size()));

  ReferenceMtpState split = model.new_mtp_state();
  for (int64_t t = 0; t < h.rows; ++t) {
    Matrix64 row(1, h.cols), hm;
    std::copy(h.row(t), h.row(t) + h.cols, row.row(0));
    const Matrix64 one = model.mtp_forward({next[size_t(t)]}, row, split, &hm);
    for (int64_t v = 0; v < all.cols; ++v) ASSERT_NEAR(one.row(0)[v], all.row(t)[v], 1e-12) << "slot " << t;
    for (int64_t d = 0; d < h.cols; ++d) ASSERT_NEAR(hm.row(0)[d], hm_whole.row(t)[d], 1e-12) << "slot " << t;
  }
  // A mismatched hidden is refused, naming the shapes.
  expect_error([&] { model.mtp_forward({1, 2}, h, split); }, "one hidden row of width");
}

TEST(MtpReference, AModelWithoutAHeadSaysSo) {
  TempDir tmp;
  ModelConfig c = tiny_with_head();
  c.mtp_num_hidden_layers = 0;
  auto ck = Checkpoint::open(write_tiny(tmp / "ck", c));
  const ReferenceModel model(*ck);
  EXPECT_FALSE(model.has_mtp());
  expect_error([&] { model.new_mtp_state(); }, "no multi-token-prediction head");
}

// Rewrites the checkpoint's fp32 tensors in place: edit(name, values) may change values.
void edit_tensors(const fs::path& dir, const std::function<void(const std::string&, std::vector<float>&)>& edit) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    std::vector<std::vector<float>> values;
    std::vector<TensorToWrite> out;
    {
      SafetensorsFile file(entry.path());
      for (const auto& [name, info] : file.tensors()) {
        ASSERT_EQ(info.dtype, DType::F32) << name;
        std::vector<float> v(size_t(info.numel()));
        std::memcpy(v.data(), info.data, info.nbytes);
        edit(name, v);
        values.push_back(std::move(v));
        out.push_back({name, DType::F32, info.shape, nullptr, info.nbytes});
      }
    }
    for (size_t i = 0; i < out.size(); ++i) out[i].data = values[i].data();
    write_safetensors(entry.path(), out);
  }
}

double rms(const double* x, int64_t n, double eps) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return std::sqrt(s / double(n) + eps);
}

// The wiring, checked without trusting the head's own layer: with fc = [0 | I]
// (the hidden half passed through), the layer's o_proj and down_proj zero (it
// adds nothing to the residual) and unit pre_fc_norm_hidden and mtp.norm, the
// head's hidden is the main model's post-norm hidden renormalized twice, so
// its logits are the model's own logits of that row divided by the two RMS
// factors (lm_head is linear). A head that read the pre-norm hidden, put the
// embedding in the second half or skipped the model's lm_head fails this.
TEST(MtpReference, APassThroughHeadGivesTheModelsOwnLogits) {
  TempDir tmp;
  const fs::path dir = write_tiny(tmp / "ck", tiny_with_head());
  const int64_t H = tiny_with_head().hidden_size;
  edit_tensors(dir, [&](const std::string& name, std::vector<float>& v) {
    if (name == "mtp.fc.weight") {  // [H, 2H]: row r = [0 .. 0 | e_r]
      std::fill(v.begin(), v.end(), 0.0f);
      for (int64_t r = 0; r < H; ++r) v[size_t(r * 2 * H + H + r)] = 1.0f;
    } else if (name == "mtp.layers.0.self_attn.o_proj.weight" || name == "mtp.layers.0.mlp.down_proj.weight" ||
               name == "mtp.pre_fc_norm_hidden.weight" || name == "mtp.norm.weight") {
      std::fill(v.begin(), v.end(), 0.0f);  // zero projections; unit (1 + 0) norms
    }
  });
  auto ck = Checkpoint::open(dir);
  const ReferenceModel model(*ck);
  const double eps = model.config().rms_norm_eps;
  const std::vector<int64_t> prompt = {5, 17, 300, 42, 7, 99};
  ReferenceState state = model.new_state();
  ReferenceTrace trace;
  const Matrix64 logits = model.forward(prompt, state, &trace);
  const Matrix64 hidden = model.final_norm(trace.hidden.back());
  const std::vector<int64_t> next = {17, 300, 42, 7, 99, 3};
  ReferenceMtpState head = model.new_mtp_state();
  const Matrix64 got = model.mtp_forward(next, hidden, head);
  for (int64_t t = 0; t < hidden.rows; ++t) {
    const double r1 = rms(hidden.row(t), H, eps);
    const double r2 = std::sqrt((r1 * r1 - eps) / (r1 * r1) + eps);  // the rms of hidden / r1
    double worst = 0, top = 0;
    for (int64_t v = 0; v < logits.cols; ++v) {
      worst = std::max(worst, std::fabs(got.row(t)[v] - logits.row(t)[v] / (r1 * r2)));
      top = std::max(top, std::fabs(logits.row(t)[v]));
    }
    EXPECT_LT(worst, 1e-9 * top) << "slot " << t;
  }
}

// ---- mtp.onnx -------------------------------------------------------------------------

BuildOptions fp32_options() {
  BuildOptions o;
  o.context_length = 256;
  return o;
}

// fp32: the decoder's hidden_states output is the reference's hidden after
// the final norm, and mtp.onnx's logits and hidden_states_out are the
// reference head's, for a whole prompt's slots and then one chained draft.
// Dense, and MoE (the head's MLP is a MoE MLP, experts fused or per expert).
class MtpBuildBoth : public ::testing::TestWithParam<std::string> {};

TEST_P(MtpBuildBoth, TheHeadMatchesTheReferenceInFp32) {
  TempDir tmp;
  ModelConfig c = tiny_with_head();
  SynthOptions so;
  so.seed = 5;
  so.dtype = DType::F32;
  if (GetParam() != "dense") {
    c = synth_preset("tiny-moe");
    c.mtp_num_hidden_layers = 1;
    so.expert_layout = GetParam() == "moe-per-expert" ? ExpertLayout::PerExpert : ExpertLayout::Fused;
  }
  write_synthetic_checkpoint(c, so, tmp / "ck");
  auto ck = Checkpoint::open(tmp / "ck");
  ASSERT_TRUE(ck->has_mtp());
  build_model(*ck, fp32_options(), tmp / "model");
  ASSERT_TRUE(fs::exists(tmp / "model" / "mtp.onnx"));
  const auto genai = nlohmann::json::parse(test::read_text(tmp / "model" / "genai_config.json"));
  EXPECT_EQ(genai["model"]["mtp"]["filename"], "mtp.onnx");
  EXPECT_EQ(genai["model"]["mtp"]["outputs"]["hidden_states"], "hidden_states_out");
  EXPECT_EQ(genai["model"]["decoder"]["outputs"]["hidden_states"], "hidden_states");

  const ReferenceModel ref(*ck);
  const std::vector<int64_t> prompt = {5, 17, 300, 42, 7, 99, 123, 256};
  ReferenceState state = ref.new_state();
  ReferenceTrace trace;
  ref.forward(prompt, state, &trace);
  const Matrix64 hidden = ref.final_norm(trace.hidden.back());

  test::StepRunner decoder(tmp / "model" / "model.onnx");
  decoder.step(prompt);
  const std::vector<float>& got_hidden = decoder.output("hidden_states");
  ASSERT_EQ(got_hidden.size(), hidden.data.size());
  for (size_t k = 0; k < got_hidden.size(); ++k) ASSERT_NEAR(got_hidden[k], hidden.data[k], 1e-4) << k;

  // Slot i: token i + 1 with hidden i; the last slot reads the token after the prompt.
  std::vector<int64_t> next(prompt.begin() + 1, prompt.end());
  next.push_back(1);
  ReferenceMtpState ms = ref.new_mtp_state();
  Matrix64 hm;
  const Matrix64 want = ref.mtp_forward(next, hidden, ms, &hm);
  test::StepRunner head(tmp / "model" / "mtp.onnx");
  // The head computes the last slot's logits only (a draft reads no other).
  const std::vector<float> got = head.step(next, got_hidden);
  ASSERT_EQ(got.size(), size_t(want.cols));
  for (int64_t v = 0; v < want.cols; ++v) ASSERT_NEAR(got[size_t(v)], want.row(want.rows - 1)[v], 1e-4) << v;
  const std::vector<float> got_hm = head.output("hidden_states_out");
  ASSERT_EQ(got_hm.size(), hm.data.size());
  for (size_t k = 0; k < got_hm.size(); ++k) ASSERT_NEAR(got_hm[k], hm.data[k], 1e-4) << k;

  // A chained draft: the head's own last hidden and the token it drafted, one position on.
  const int64_t H = hidden.cols, V = want.cols;
  const double* last = want.row(want.rows - 1);
  const int64_t draft = int64_t(std::max_element(last, last + V) - last);
  Matrix64 chained(1, H);
  std::copy(hm.row(hm.rows - 1), hm.row(hm.rows - 1) + H, chained.row(0));
  const Matrix64 want2 = ref.mtp_forward({draft}, chained, ms);
  const std::vector<float> got2 =
      head.step({draft}, std::vector<float>(got_hm.end() - H, got_hm.end()));
  for (int64_t v = 0; v < V; ++v) ASSERT_NEAR(got2[size_t(v)], want2.row(0)[v], 1e-4) << v;
}

INSTANTIATE_TEST_SUITE_P(MtpBuild, MtpBuildBoth, ::testing::Values("dense", "moe", "moe-per-expert"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Every precision builds a head ORT runs (int4 on deltagen's MatMulNBits
// kernels when the runtime loads it); --no-mtp leaves it and the decoder's
// hidden_states out. A MoE checkpoint's head (quantized experts: QMoE) too.
TEST(MtpBuild, EveryPrecisionAndTheSwitches) {
  TempDir tmp;
  ModelConfig moe = synth_preset("tiny-moe");
  moe.mtp_num_hidden_layers = 1;
  auto moe_ck = Checkpoint::open(write_tiny(tmp / "moe-ck", moe));
  auto ck = Checkpoint::open(write_tiny(tmp / "ck", tiny_with_head()));
  for (const Checkpoint* c : {ck.get(), moe_ck.get()})
    for (Precision p : {Precision::Fp16, Precision::Int4, Precision::Int8}) {
      const std::string what = std::string(c->config().is_moe() ? "moe " : "dense ") + precision_name(p);
      BuildOptions o = fp32_options();
      o.precision = p;
      const fs::path out = tmp / (c->config().is_moe() ? "moe" : "dense") / precision_name(p);
      build_model(*c, o, out);
      test::StepRunner head(out / "mtp.onnx");
      const int64_t H = c->config().hidden_size;
      const std::vector<float> logits = head.step({1, 2, 3}, std::vector<float>(size_t(3 * H), 0.5f));
      ASSERT_EQ(logits.size(), size_t(c->config().vocab_size)) << what;  // the last slot's
      for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << what;
    }
  BuildOptions off = fp32_options();
  off.mtp = false;
  build_model(*ck, off, tmp / "off");
  EXPECT_FALSE(fs::exists(tmp / "off" / "mtp.onnx"));
  EXPECT_FALSE(nlohmann::json::parse(test::read_text(tmp / "off" / "genai_config.json"))["model"].contains("mtp"));
  test::StepRunner decoder(tmp / "off" / "model.onnx");
  decoder.step({1, 2});
  EXPECT_THROW(decoder.output("hidden_states"), std::out_of_range);
}

// ---- Qwen3.6 shapes ------------------------------------------------------------------

// The 27B preset has Qwen3.5/3.6-27B's published shapes; with --mtp its head
// is one gated full-attention layer of the same widths.
TEST(MtpPresets, The27bPresetHasTheReleasedShapes) {
  ModelConfig c = synth_preset("27b");
  EXPECT_EQ(c.num_hidden_layers, 64);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_attention_heads, 24);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.intermediate_size, 17408);
  EXPECT_EQ(c.linear_num_key_heads, 16);
  EXPECT_EQ(c.linear_num_value_heads, 48);
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_full_layers(), 16);
  c.mtp_num_hidden_layers = 1;
  const std::vector<TensorSpec> head = qwen35_mtp_tensor_specs(c);
  EXPECT_EQ(head.front().name, "mtp.fc.weight");
  EXPECT_EQ(head.front().shape, (std::vector<int64_t>{5120, 10240}));
  const auto q = std::find_if(head.begin(), head.end(), [](const TensorSpec& s) {
    return s.name == "mtp.layers.0.self_attn.q_proj.weight";
  });
  ASSERT_NE(q, head.end());
  EXPECT_EQ(q->shape, (std::vector<int64_t>{12288, 5120}));  // 24 heads x 256 x (query + gate)
  // The text-only layout of the same (qwen3_5_text with 64 layers) parses back to it.
  const ModelConfig back = parse_config(config_to_json(c, /*vl_layout=*/false), "config.json");
  EXPECT_EQ(back.num_hidden_layers, 64);
  EXPECT_EQ(back.mtp_num_hidden_layers, 1);
  EXPECT_EQ(back.linear_num_value_heads, 48);
}

}  // namespace
}  // namespace deltagen
