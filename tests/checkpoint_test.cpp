// Checkpoint reading: config.json layouts, safetensors validation, tensor
// names, against the golden checkpoint and hand-made broken files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "test_util.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

using test::golden_checkpoint;

TEST(Checkpoint, OpensGoldenVlLayout) {
  auto ck = Checkpoint::open(golden_checkpoint());
  const ModelConfig& c = ck->config();
  EXPECT_EQ(c.model_type, "qwen3_5");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.rotary_dim(), 4);
  EXPECT_EQ(c.conv_dim(), 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_TRUE(c.tie_word_embeddings);
  ASSERT_EQ(c.layer_types.size(), 4u);
  EXPECT_FALSE(c.is_full(0));
  EXPECT_TRUE(c.is_full(3));
  ASSERT_EQ(c.eos_token_ids.size(), 1u);
  EXPECT_EQ(c.eos_token_ids[0], 511);
  EXPECT_EQ(ck->lm_head_name(), "embed_tokens.weight");
  EXPECT_EQ(ck->info("layers.0.linear_attn.conv1d.weight").shape, (std::vector<int64_t>{128, 1, 4}));
  auto a_log = ck->load_f32("layers.0.linear_attn.A_log");
  EXPECT_EQ(a_log.size(), 4u);
}

}  // namespace
}  // namespace deltagen

#include "broken_checkpoints.h"
#include "synth/synth.h"

namespace deltagen {
namespace {

using test::TempDir;

std::string open_error(const std::filesystem::path& dir) {
  try {
    Checkpoint::open(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, EveryBreakageGivesOneLineErrorNamingFileAndProblem) {
  for (const auto& b : test::checkpoint_breakages()) {
    TempDir tmp;
    auto dir = tmp / "ck";
    test::copy_golden(dir);
    b.apply(dir);
    std::string err = open_error(dir);
    SCOPED_TRACE(b.name + ": " + err);
    ASSERT_FALSE(err.empty());
    EXPECT_EQ(err.find('\n'), std::string::npos);
    EXPECT_NE(err.find(b.expect_problem), std::string::npos);
    if (!b.expect_file.empty()) EXPECT_NE(err.find(b.expect_file), std::string::npos);
  }
}

TEST(Checkpoint, LayerTypesFromFullAttentionInterval) {
  TempDir tmp;
  auto dir = tmp / "ck";
  test::copy_golden(dir);
  auto j = test::read_json(dir / "config.json");
  j["text_config"].erase("layer_types");
  j["text_config"]["full_attention_interval"] = 2;
  j["text_config"]["num_hidden_layers"] = 4;
  auto c = parse_config(j, "cfg");
  ASSERT_EQ(c.layer_types.size(), 4u);
  EXPECT_FALSE(c.is_full(0));
  EXPECT_TRUE(c.is_full(1));
  EXPECT_FALSE(c.is_full(2));
  EXPECT_TRUE(c.is_full(3));
  j["text_config"].erase("full_attention_interval");
  EXPECT_THROW(parse_config(j, "cfg"), Error);
}

TEST(Checkpoint, TextOnlyLayoutShardedBf16Untied) {
  TempDir tmp;
  ModelConfig cfg = synth_preset("tiny");
  set_num_layers(cfg, 8);
  cfg.tie_word_embeddings = false;
  cfg.model_type = "qwen3_5_text";
  SynthOptions opts;
  opts.seed = 7;
  opts.dtype = DType::BF16;
  opts.vl_layout = false;
  opts.shard_bytes = 100 * 1024;
  write_synthetic_checkpoint(cfg, opts, tmp / "ck");
  EXPECT_TRUE(std::filesystem::exists(tmp / "ck" / "model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "ck" / "model.safetensors"));

  auto ck = Checkpoint::open(tmp / "ck");
  const ModelConfig& c = ck->config();
  EXPECT_EQ(c.model_type, "qwen3_5_text");
  EXPECT_EQ(c.num_hidden_layers, 8);
  EXPECT_TRUE(c.is_full(7));
  EXPECT_FALSE(c.is_full(6));
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(ck->lm_head_name(), "lm_head.weight");
  EXPECT_EQ(ck->info("layers.5.mlp.up_proj.weight").dtype, DType::BF16);
  // bf16 values are exact in fp32, and lm_head differs from the embedding.
  auto lm = ck->load_f32("lm_head.weight");
  auto emb = ck->load_f32("embed_tokens.weight");
  EXPECT_NE(lm, emb);
}

TEST(Checkpoint, SynthIsDeterministicPerSeed) {
  TempDir tmp;
  ModelConfig cfg = synth_preset("tiny");
  SynthOptions opts;
  opts.dtype = DType::F32;
  opts.seed = 1;
  write_synthetic_checkpoint(cfg, opts, tmp / "a");
  write_synthetic_checkpoint(cfg, opts, tmp / "b");
  opts.seed = 2;
  write_synthetic_checkpoint(cfg, opts, tmp / "c");
  auto a = test::read_text(tmp / "a" / "model.safetensors");
  EXPECT_EQ(a, test::read_text(tmp / "b" / "model.safetensors"));
  EXPECT_NE(a, test::read_text(tmp / "c" / "model.safetensors"));
  EXPECT_EQ(test::read_text(tmp / "a" / "config.json"), test::read_text(tmp / "c" / "config.json"));
}

TEST(Checkpoint, PresetsHaveTheRealShapes) {
  auto c = synth_preset("0.8b");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.num_full_layers(), 6);
  EXPECT_EQ(c.conv_dim(), 6144);
  EXPECT_EQ(c.rotary_dim(), 64);
  auto nine = synth_preset("9b");
  EXPECT_EQ(nine.linear_num_value_heads, 32);
  EXPECT_EQ(nine.num_full_layers(), 8);
  EXPECT_FALSE(nine.tie_word_embeddings);
  // The preset config survives a write/parse round trip in both layouts.
  for (bool vl : {true, false}) {
    auto back = parse_config(config_to_json(nine, vl), "x");
    EXPECT_EQ(back.conv_dim(), nine.conv_dim());
    EXPECT_EQ(back.layer_types, nine.layer_types);
    EXPECT_EQ(back.eos_token_ids, nine.eos_token_ids);
    EXPECT_DOUBLE_EQ(back.rope_theta, nine.rope_theta);
  }
  EXPECT_THROW(synth_preset("70b"), Error);
}

TEST(Checkpoint, ShardIndexNamingAMissingFileIsAnError) {
  TempDir tmp;
  ModelConfig cfg = synth_preset("tiny");
  SynthOptions opts;
  opts.shard_bytes = 100 * 1024;
  write_synthetic_checkpoint(cfg, opts, tmp / "ck");
  auto index = test::read_json(tmp / "ck" / "model.safetensors.index.json");
  std::string shard = index["weight_map"]["model.language_model.norm.weight"];
  EXPECT_NE(shard, "model.safetensors");
  std::filesystem::remove(tmp / "ck" / shard);
  std::string err = open_error(tmp / "ck");
  EXPECT_NE(err.find(shard), std::string::npos) << err;
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
}

TEST(Checkpoint, SynthCliRejectsBadPresetAndLeavesNothing) {
  TempDir tmp;
  auto r = test::run_cli({"synth", "--preset", "huge", "--out", (tmp / "x").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown preset 'huge'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp / "x"));
  r = test::run_cli({"synth", "--preset", "tiny", "--out", (tmp / "y").string(), "--layers", "8", "--dtype", "f32"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Checkpoint::open(tmp / "y")->config().num_hidden_layers, 8);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(tmp.path()), {}), 1);  // no temp leftovers
}

}  // namespace
}  // namespace deltagen
