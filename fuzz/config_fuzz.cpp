// Fuzzes config.json -> ModelConfig (parse_config), the first file a build,
// a reference run or a checkpoint check reads.
//
// For every accepted config the fuzzer also computes the tensor table
// Checkpoint::open derives from it (qwen35_tensor_specs: UBSan watches its
// size arithmetic), and checks that the config survives the round trip
// through config_to_json (what `synth` writes) unchanged.
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config.h"
#include "fuzz_util.h"

using namespace deltagen;

namespace {

void same(bool equal, const char* field) {
  if (!equal) fuzz::finding(std::string("config_to_json round trip changed ") + field);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j;
  try {
    // As load_config: bytes that are not JSON are rejected before parse_config.
    j = nlohmann::json::parse(data, data + size);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  ModelConfig cfg;
  if (!fuzz::expect_only_error("parse_config", [&] { cfg = parse_config(j, "config.json"); })) return 0;

  fuzz::expect_only_error("qwen35_tensor_specs", [&] { (void)qwen35_tensor_specs(cfg); });

  for (bool vl : {false, true}) {
    ModelConfig back;
    if (!fuzz::expect_only_error("parse_config(config_to_json)",
                                 [&] { back = parse_config(config_to_json(cfg, vl), "round trip"); }))
      fuzz::finding("parse_config refuses what config_to_json wrote for an accepted config");
    same(back.vocab_size == cfg.vocab_size, "vocab_size");
    same(back.hidden_size == cfg.hidden_size, "hidden_size");
    same(back.intermediate_size == cfg.intermediate_size, "intermediate_size");
    same(back.num_hidden_layers == cfg.num_hidden_layers, "num_hidden_layers");
    same(back.num_attention_heads == cfg.num_attention_heads, "num_attention_heads");
    same(back.num_key_value_heads == cfg.num_key_value_heads, "num_key_value_heads");
    same(back.head_dim == cfg.head_dim, "head_dim");
    same(back.rotary_dim() == cfg.rotary_dim(), "rotary_dim");
    same(back.linear_num_key_heads == cfg.linear_num_key_heads, "linear_num_key_heads");
    same(back.linear_num_value_heads == cfg.linear_num_value_heads, "linear_num_value_heads");
    same(back.linear_key_head_dim == cfg.linear_key_head_dim, "linear_key_head_dim");
    same(back.linear_value_head_dim == cfg.linear_value_head_dim, "linear_value_head_dim");
    same(back.linear_conv_kernel_dim == cfg.linear_conv_kernel_dim, "linear_conv_kernel_dim");
    same(back.layer_types == cfg.layer_types, "layer_types");
    same(back.tie_word_embeddings == cfg.tie_word_embeddings, "tie_word_embeddings");
    same(back.eos_token_ids == cfg.eos_token_ids, "eos_token_ids");
    same(back.max_position_embeddings == cfg.max_position_embeddings, "max_position_embeddings");
  }
  return 0;
}
