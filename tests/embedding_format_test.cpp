// --embedding: the embedding table's format apart from the lm_head's. On the
// tied golden checkpoint, a format other than the lm_head's splits the one
// table in two (each of the asked format), the logits stay where the formats
// put them, and the weight counts (measure/graph_facts.h) agree with a count
// by hand: the file holds both tables, a decoded token reads one row of the
// embedding and the whole lm_head. Bad values are one-line errors naming the flag.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "cli_errors.h"
#include "graph/model_summary.h"
#include "graph_query.h"
#include "measure/graph_facts.h"
#include "models/build.h"
#include "ort_step_runner.h"
#include "test_util.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::golden_checkpoint;
using test::TempDir;

BuildOptions int4(std::optional<Precision> embedding = std::nullopt) {
  BuildOptions o;
  o.precision = Precision::Int4;
  o.embedding_precision = embedding;
  o.context_length = 256;
  o.show_progress = false;
  return o;
}

fs::path build(const BuildOptions& o, const fs::path& out) {
  build_model(*Checkpoint::open(golden_checkpoint()), o, out);
  return out / "model.onnx";
}

const onnx::TensorProto* initializer(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

// Logits of the golden prompt, one prefill run.
std::vector<float> prompt_logits(const fs::path& model) {
  test::StepRunner run(model);
  return run.step(test::kGoldenPrompt);
}

TEST(EmbeddingFormat, SplitsTheTiedTableIntoTheAskedFormats) {
  TempDir dir;
  const ModelConfig cfg = Checkpoint::open(golden_checkpoint())->config();
  ASSERT_TRUE(cfg.tie_word_embeddings);

  // Today's int4 build: one table, which GatherBlockQuantized reads through a Reshape.
  const onnx::ModelProto plain = graph::load_model_proto(build(int4(), dir / "plain"));
  ASSERT_EQ(test::nodes_of(plain, "com.microsoft.GatherBlockQuantized").size(), 1u);
  EXPECT_EQ(initializer(plain, "model.embed_tokens.weight"), nullptr);

  // fp16: a float Gather of its own fp16 table, cast to the fp32 activations; the lm_head stays int4.
  const onnx::ModelProto fp16 = graph::load_model_proto(build(int4(Precision::Fp16), dir / "fp16"));
  const onnx::TensorProto* table = initializer(fp16, "model.embed_tokens.weight");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->data_type(), onnx::TensorProto::FLOAT16);
  EXPECT_EQ(test::nodes_of(fp16, "com.microsoft.GatherBlockQuantized").size(), 0u);
  ASSERT_EQ(test::nodes_of(fp16, "Gather", "/model/embed_tokens").size(), 1u);
  const auto heads = test::nodes_of(fp16, "com.microsoft.MatMulNBits", "/lm_head");
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_EQ(test::int_attr(*heads[0], "bits"), 4);

  // int8: GatherBlockQuantized of 8 bits on a table of its own; the lm_head's 4-bit codes are not it.
  const onnx::ModelProto int8 = graph::load_model_proto(build(int4(Precision::Int8), dir / "int8"));
  const auto gathers = test::nodes_of(int8, "com.microsoft.GatherBlockQuantized");
  ASSERT_EQ(gathers.size(), 1u);
  EXPECT_EQ(test::int_attr(*gathers[0], "bits"), 8);
  const auto head8 = test::nodes_of(int8, "com.microsoft.MatMulNBits", "/lm_head");
  ASSERT_EQ(head8.size(), 1u);
  EXPECT_EQ(test::int_attr(*head8[0], "bits"), 4);
  EXPECT_NE(initializer(int8, "model.embed_tokens.weight_Q8"), nullptr);

  // int4 at the lm_head's own format: nothing to split, today's model byte for byte.
  build(int4(Precision::Int4), dir / "same");
  EXPECT_EQ(test::read_text(dir / "same" / "model.onnx"), test::read_text(dir / "plain" / "model.onnx"));
}

TEST(EmbeddingFormat, LogitsFollowTheTablesFormats) {
  TempDir dir;
  // --embedding fp32 is the float gather of --embedding-gather float: the same
  // fp32 table and the same int4 lm_head (rtn: no damping to differ by).
  BuildOptions float_gather = int4();
  float_gather.quantized_embedding_gather = false;
  const std::vector<float> a = prompt_logits(build(float_gather, dir / "float-gather"));
  const std::vector<float> b = prompt_logits(build(int4(Precision::Fp32), dir / "fp32"));
  EXPECT_EQ(test::max_abs_diff(a, b), 0.0);
  // An int8 table moves the logits a little from the fp32 table's; int4's
  // shared table (the plain build) moves them more.
  const double int8 = test::max_abs_diff(prompt_logits(build(int4(Precision::Int8), dir / "int8")), b);
  const double plain = test::max_abs_diff(prompt_logits(build(int4(), dir / "plain")), b);
  std::printf("max |logit diff| vs the fp32 table: int8 table %.4f, shared int4 table %.4f\n", int8, plain);
  EXPECT_GT(int8, 0.0);
  EXPECT_LT(int8, plain);
}

// The count by hand: every checkpoint tensor stored as the build stores it.
// Linear weights (2-D) as int4 at block 32 with fp32 scales (N * K / 2 code
// bytes + 4 bytes per block), the rest fp32; the tied table twice when split.
TEST(EmbeddingFormat, WeightCountsMatchACountByHand) {
  TempDir dir;
  const ModelConfig cfg = Checkpoint::open(golden_checkpoint())->config();
  const double V = double(cfg.vocab_size), H = double(cfg.hidden_size);
  double weights = 0, bytes = 0;
  for (const TensorSpec& t : qwen35_tensor_specs(cfg)) {
    double n = 1;
    for (int64_t d : t.shape) n *= double(d);
    weights += n;
    if (t.shape.size() == 2) bytes += n / 2 + n / 32 * 4;  // the tied table: as the lm_head
    else bytes += 4 * n;
  }

  build(int4(), dir / "plain");
  const measure::GraphFacts plain = measure::graph_facts(dir / "plain");
  EXPECT_EQ(plain.stored.weights, weights);
  EXPECT_EQ(plain.stored.bytes, bytes);
  // One shared table: the lm_head reads it whole, so a token reads everything.
  EXPECT_EQ(plain.read_per_token.weights, weights);
  EXPECT_EQ(plain.read_per_token.bytes, bytes);

  build(int4(Precision::Fp16), dir / "fp16");
  const measure::GraphFacts split = measure::graph_facts(dir / "fp16");
  EXPECT_EQ(split.stored.weights, weights + V * H);
  EXPECT_EQ(split.stored.bytes, bytes + 2 * V * H);
  // The token reads the int4 lm_head and one fp16 row of the table.
  EXPECT_EQ(split.read_per_token.weights, weights + H);
  EXPECT_EQ(split.read_per_token.bytes, bytes + 2 * H);

  // quantization.json says the same.
  const nlohmann::json q = nlohmann::json::parse(test::read_text(dir / "fp16" / "quantization.json"));
  EXPECT_EQ(q["weights"]["file"]["bytes"].get<double>(), bytes + 2 * V * H);
  EXPECT_EQ(q["weights"]["read_per_token"]["bytes"].get<double>(), bytes + 2 * H);
  EXPECT_NEAR(q["weights"]["read_per_token"]["bits_per_weight"].get<double>(), 8 * (bytes + 2 * H) / (weights + H),
              1e-9);
}

TEST(EmbeddingFormat, CliBadValuesAreOneLineErrors) {
  TempDir dir;
  auto build_cli = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"build", "--checkpoint", golden_checkpoint().string(), "--out",
                                     (dir / "m").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run_cli(args);
  };
  test::expect_one_line_error(build_cli({"--precision", "int4", "--embedding", "int3"}), "--embedding");
  test::expect_one_line_error(build_cli({"--precision", "int4", "--embedding", "bf16"}), "--embedding");
  test::expect_one_line_error(build_cli({"--precision", "fp16", "--embedding", "int8"}), "--embedding");
  test::expect_one_line_error(build_cli({"--precision", "int4", "--embedding", "int4", "--embedding-gather", "float"}),
                              "--embedding-gather");
  test::expect_one_line_error(build_cli({"--precision", "int4", "--embedding", "fp16", "--exclude-embeds"}),
                              "--embedding");
  test::expect_one_line_error(build_cli({"--precision", "int4", "--budget-of", "file"}), "--budget-of");
  test::expect_one_line_error(build_cli({"--precision", "int4", "--bits-budget", "4.5", "--budget-of", "disk"}),
                              "--budget-of");
  EXPECT_FALSE(fs::exists(dir / "m"));
}

}  // namespace
}  // namespace deltagen
