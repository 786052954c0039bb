// deltagen compare --layers on the golden checkpoint (4 layers: L L L F): the
// metrics and the divergence rule on hand-made numbers, an fp32
// --layer-outputs build against the float64 reference layer by layer, builds
// of a checkpoint with one layer's weight scaled (named as the first
// diverging layer, against the reference and against a good build), fp16 and
// int4 builds, and the CLI's output and one-line errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "broken_checkpoints.h"
#include "checkpoint/checkpoint.h"
#include "measure/compare.h"
#include "measure/corpus.h"
#include "measure/layer_compare.h"
#include "models/build.h"
#include "synth/synth.h"
#include "cli_errors.h"
#include "test_util.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using measure::CompareOptions;
using measure::LayerReport;
using test::golden_checkpoint;
using test::run_cli;
using test::TempDir;

// Multiplies every element of an F32 tensor of a safetensors file by `factor`.
void scale_tensor(const fs::path& file, const std::string& tensor, float factor) {
  std::string bytes = test::read_text(file);
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, len));
  const auto& entry = header.at(tensor);
  ASSERT_EQ(entry.at("dtype"), "F32");
  const size_t begin = 8 + len + entry.at("data_offsets")[0].get<size_t>();
  const size_t end = 8 + len + entry.at("data_offsets")[1].get<size_t>();
  for (size_t p = begin; p < end; p += 4) {
    float x;
    std::memcpy(&x, bytes.data() + p, 4);
    x *= factor;
    std::memcpy(bytes.data() + p, &x, 4);
  }
  test::write_text(file, bytes);
}

const std::string kPrefix = "model.language_model.";

// Every model the tests compare, built once per process with --layer-outputs.
struct Models {
  TempDir dir;
  fs::path fp32, fp16, int4, plain, broken_linear, broken_full;
  Models() {
    auto ckpt = Checkpoint::open(golden_checkpoint());
    auto build = [&](const Checkpoint& c, Precision precision, bool layers, const std::string& name) {
      BuildOptions o;
      o.show_progress = false;
      o.context_length = 256;
      o.precision = precision;
      o.layer_outputs = layers;
      build_model(c, o, dir / name);
      return dir / name;
    };
    fp32 = build(*ckpt, Precision::Fp32, true, "fp32");
    fp16 = build(*ckpt, Precision::Fp16, true, "fp16");
    int4 = build(*ckpt, Precision::Int4, true, "int4");
    plain = build(*ckpt, Precision::Fp32, false, "plain");
    // One weight of one layer 1.5x too large: the MLP of linear-attention
    // layer 1, the attention output of full-attention layer 3.
    const std::pair<std::string, std::string> breaks[] = {
        {"broken-linear", "layers.1.mlp.down_proj.weight"}, {"broken-full", "layers.3.self_attn.o_proj.weight"}};
    for (const auto& [name, tensor] : breaks) {
      test::copy_golden(dir / (name + "-ckpt"));
      scale_tensor(dir / (name + "-ckpt") / "model.safetensors", kPrefix + tensor, 1.5f);
      build(*Checkpoint::open(dir / (name + "-ckpt")), Precision::Fp32, true, name);
    }
    broken_linear = dir / "broken-linear";
    broken_full = dir / "broken-full";
  }
};
const Models& models() {
  static Models m;
  return m;
}

CompareOptions small_options() {
  CompareOptions o;
  o.context = 64;
  o.chunk = 24;  // not a divisor of the window: chunks must not matter
  o.threads = 1;
  return o;
}

std::vector<int64_t> corpus() { return measure::pseudo_random_ids(150, 512, 5); }

LayerReport against_reference(const fs::path& model, KernelSet kernels = KernelSet::Deltagen) {
  auto ref = measure::reference_source(golden_checkpoint(), true);
  auto b = measure::onnx_source(model, 1, 64, kernels, true);
  return measure::compare_layers(*ref, *b, corpus(), small_options());
}

// ---- metrics and the rule ----------------------------------------------------------------------

TEST(LayerDiff, MatchesHandComputedValues) {
  measure::DiffAccumulator acc;
  const double a1[2] = {3, 4}, b1[2] = {3, 0};  // |B - A| = (0, 4); cos = 9 / (5 * 3)
  const double a2[2] = {1, 0}, b2[2] = {1, 0};  // identical
  acc.add(b1, a1, 2);
  acc.add(b2, a2, 2);
  const auto r = acc.result();
  EXPECT_EQ(r.positions, 2);
  EXPECT_EQ(r.max_abs_diff, 4.0);
  EXPECT_EQ(r.mean_abs_diff, 1.0);                     // 4 / 4 elements
  EXPECT_NEAR(r.rel_error, std::sqrt(16.0 / 26.0), 1e-15);  // ||(0,4,0,0)|| / ||(3,4,1,0)||
  EXPECT_NEAR(r.cos_mean, 0.8, 1e-15);
  EXPECT_NEAR(r.cos_min, 0.6, 1e-15);

  measure::DiffAccumulator zeros;
  const double z[2] = {0, 0};
  zeros.add(z, z, 2);
  EXPECT_EQ(zeros.result().rel_error, 0.0);
  EXPECT_EQ(zeros.result().cos_mean, 1.0);
  zeros.add(a1, z, 2);  // B is something where A is nothing
  EXPECT_TRUE(std::isinf(zeros.result().rel_error));
  EXPECT_EQ(zeros.result().cos_min, 0.0);
}

// A report whose rows have these relative errors, run through the rule.
LayerReport judged(const std::vector<double>& rel) {
  LayerReport r;
  for (size_t k = 0; k < rel.size(); ++k) {
    measure::LayerRow row;
    row.name = "row " + std::to_string(k);
    row.diff.rel_error = rel[k];
    r.rows.push_back(row);
  }
  measure::find_divergence(r);
  return r;
}

TEST(LayerDivergence, JumpsAndThresholdsAboveTheNoiseFloor) {
  // fp32 rounding: tiny relative errors that grow 1000x still do not count.
  EXPECT_EQ(judged({0, 1e-9, 1e-6, 2e-6, 3e-6}).first_divergent, -1);
  // A sudden jump is named where it happens.
  LayerReport jump = judged({0, 1e-6, 0.05, 0.1, 0.2});
  EXPECT_EQ(jump.first_divergent, 2);
  EXPECT_EQ(jump.reason, "jump");
  EXPECT_DOUBLE_EQ(jump.rows[2].growth, 50.0);  // over the floor, not over 1e-6
  // Exactly the jump factor counts; just under it does not.
  EXPECT_EQ(judged({2e-3, 2e-2}).first_divergent, 1);
  EXPECT_EQ(judged({2e-3, 1.99e-2}).first_divergent, -1);
  // A slow drift is named where it reaches the threshold.
  LayerReport drift = judged({2e-3, 4e-3, 8e-3, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.0});
  EXPECT_EQ(drift.first_divergent, 8);
  EXPECT_EQ(drift.reason, "threshold");
  // Embeddings already 10 % off (an int4 table): the embeddings row.
  EXPECT_EQ(judged({0.1, 0.12, 0.15}).first_divergent, 0);
  // Rules that cannot work are refused.
  test::expect_error([] { measure::validate(measure::DivergenceRule{.jump_factor = 1}); }, "--jump-factor");
  test::expect_error([] { measure::validate(measure::DivergenceRule{.noise_floor = 0}); }, "--noise-floor");
  test::expect_error([] { measure::validate(measure::DivergenceRule{.rel_threshold = 1e-4}); }, "--rel-threshold");
}

// ---- real models ----------------------------------------------------------------------------------

TEST(LayerCompare, Fp32BuildMatchesTheReferenceLayerByLayer) {
  for (KernelSet kernels : {KernelSet::Ort, KernelSet::Deltagen}) {
    const LayerReport r = against_reference(models().fp32, kernels);
    EXPECT_EQ(r.windows, 3);  // 64 + 64 + 22
    EXPECT_EQ(r.positions, 150);
    ASSERT_EQ(r.rows.size(), 6u);
    EXPECT_EQ(r.rows[0].name, "embeddings");
    EXPECT_EQ(r.rows[1].kind, "linear_attention");
    EXPECT_EQ(r.rows[4].kind, "full_attention");
    EXPECT_EQ(r.rows[4].output, "hidden_states.4");
    EXPECT_EQ(r.rows[5].name, "logits");
    EXPECT_EQ(r.rows[0].diff.max_abs_diff, 0.0);  // the fp32 table's rows, exactly
    for (const auto& row : r.rows) {
      SCOPED_TRACE(row.name);
      EXPECT_EQ(row.diff.positions, 150);
      EXPECT_LT(row.diff.max_abs_diff, 1e-4);
      EXPECT_LT(row.diff.rel_error, 1e-5);
      EXPECT_GT(row.diff.cos_min, 1 - 1e-9);
    }
    EXPECT_GT(r.rows[4].diff.max_abs_diff, 0);  // fp32 is not fp64
    EXPECT_EQ(r.first_divergent, -1);
  }
}

TEST(LayerCompare, NamesTheLayerWhoseWeightIsWrong) {
  const std::pair<fs::path, int64_t> cases[] = {{models().broken_linear, 1}, {models().broken_full, 3}};
  for (const auto& [model, layer] : cases) {
    SCOPED_TRACE(model.filename().string());
    const LayerReport r = against_reference(model);
    ASSERT_EQ(r.first_divergent, layer + 1);  // row 0 is the embeddings
    EXPECT_EQ(r.rows[size_t(layer + 1)].name, "layer " + std::to_string(layer));
    EXPECT_EQ(r.reason, "jump");
    for (int64_t k = 0; k <= layer; ++k) EXPECT_LT(r.rows[size_t(k)].diff.rel_error, 1e-5);
    EXPECT_GT(r.rows[size_t(layer + 1)].diff.rel_error, 1e-2);

    // Two ONNX models: the same row.
    auto good = measure::onnx_source(models().fp32, 1, 64, KernelSet::Deltagen, true);
    auto bad = measure::onnx_source(model, 1, 64, KernelSet::Deltagen, true);
    EXPECT_EQ(measure::compare_layers(*good, *bad, corpus(), small_options()).first_divergent, layer + 1);
  }
}

TEST(LayerCompare, LowerPrecisionBuilds) {
  // fp16 rounding grows gently: no row diverges.
  const LayerReport fp16 = against_reference(models().fp16);
  EXPECT_EQ(fp16.first_divergent, -1);
  EXPECT_GT(fp16.rows[0].diff.rel_error, 0);
  for (const auto& row : fp16.rows) EXPECT_GT(row.diff.cos_mean, 0.999) << row.name;
  // int4 starts at the quantized embedding table.
  const LayerReport int4 = against_reference(models().int4);
  EXPECT_EQ(int4.first_divergent, 0);
  EXPECT_EQ(int4.reason, "jump");
  EXPECT_GT(int4.rows[0].diff.rel_error, 1e-2);
}

TEST(LayerCompare, RefusesModelsWithoutLayerOutputsOrOfOtherShapes) {
  test::expect_error([] { measure::onnx_source(models().plain, 1, 64, KernelSet::Deltagen, true); },
                     "--layer-outputs");
  auto ref = measure::reference_source(golden_checkpoint(), false);  // keeps no layers
  auto b = measure::onnx_source(models().fp32, 1, 64, KernelSet::Deltagen, true);
  test::expect_error([&] { measure::compare_layers(*ref, *b, corpus(), small_options()); }, "keeps no layer outputs");

  // The same widths, 8 layers.
  TempDir dir;
  ModelConfig cfg = synth_preset("tiny");
  set_num_layers(cfg, 8);
  write_synthetic_checkpoint(cfg, SynthOptions{}, dir / "deeper");
  auto ref4 = measure::reference_source(golden_checkpoint(), true);
  auto ref8 = measure::reference_source(dir / "deeper", true);
  test::expect_error([&] { measure::compare_layers(*ref4, *ref8, corpus(), small_options()); }, "has 8 of width 64");
}

// ---- the CLI ---------------------------------------------------------------------------------------

TEST(LayerCompareCli, TextAndJson) {
  const std::string ck = golden_checkpoint().string();
  auto text = run_cli({"compare", "--layers", "--a", models().broken_linear.string(), "--reference", ck, "--tokens",
                       "40", "--context", "32", "--threads", "1"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("| layer 3 | full_attention |"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("| layer 1 ← first | linear_attention |"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("First divergence: layer 1 (linear_attention), output hidden_states.2"), std::string::npos)
      << text.out;

  TempDir tmp;
  auto json = run_cli({"compare", "--layers", "--a", models().fp32.string(), "--b", models().broken_full.string(),
                       "--tokens", "40", "--context", "32", "--json", "--json-out", (tmp / "r.json").string()});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j, test::read_json(tmp / "r.json"));
  ASSERT_EQ(j["layer_comparisons"].size(), 1u);
  const auto& c = j["layer_comparisons"][0];
  EXPECT_EQ(c["positions"], 40);
  EXPECT_EQ(c["layers"].size(), 6u);
  EXPECT_EQ(c["layers"][4]["output"], "hidden_states.4");
  EXPECT_EQ(c["first_divergence"]["name"], "layer 3");
  EXPECT_EQ(c["first_divergence"]["reason"], "jump");

  // Both models against the reference: two comparisons, the good one without a divergence.
  auto both = run_cli({"compare", "--layers", "--a", models().fp32.string(), "--b", models().broken_full.string(),
                       "--reference", ck, "--tokens", "40", "--context", "32", "--json"});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  const auto jb = nlohmann::json::parse(both.out);
  ASSERT_EQ(jb["layer_comparisons"].size(), 2u);
  EXPECT_TRUE(jb["layer_comparisons"][0]["first_divergence"].is_null());
  EXPECT_EQ(jb["layer_comparisons"][1]["first_divergence"]["row"], 4);
}

using test::expect_one_line_error;

TEST(LayerCompareCli, BadFlagsGiveOneLineErrors) {
  const std::string ck = golden_checkpoint().string(), fp32 = models().fp32.string();
  const std::string plain = models().plain.string();
  auto compare = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "compare");
    args.insert(args.end(), {"--tokens", "16", "--context", "16"});
    return run_cli(args);
  };
  expect_one_line_error(compare({"--layers", "--a", plain, "--reference", ck}),
                        "error: " + plain + ": built without --layer-outputs (it has no hidden_states.N outputs); "
                        "rebuild it with --layer-outputs");
  expect_one_line_error(compare({"--layers", "--a", fp32, "--b", plain}), plain);
  expect_one_line_error(compare({"--layers", "--b", fp32}), "--layers needs --a DIR and --b DIR");
  expect_one_line_error(compare({"--layers", "--reference", ck}), "needs a model to compare");
  expect_one_line_error(compare({"--layers", "--depth", "4"}), "--layers: does not combine with --depth");
  expect_one_line_error(compare({"--a", fp32, "--b", fp32, "--jump-factor", "5"}), "--jump-factor: only applies to --layers");
  expect_one_line_error(compare({"--layers", "--a", fp32, "--b", fp32, "--jump-factor", "1"}), "--jump-factor: must be more than 1");
  expect_one_line_error(compare({"--layers", "--a", fp32, "--b", fp32, "--noise-floor", "x"}), "--noise-floor: not a number");
  expect_one_line_error(compare({"--layers", "--a", fp32, "--b", fp32, "--greedy-tokens", "8"}),
                        "--greedy-tokens: does not apply to --layers");
}

}  // namespace
}  // namespace deltagen
