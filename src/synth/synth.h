// Synthetic Qwen3.5 checkpoints: the real Hugging Face layout (config.json +
// safetensors, optionally sharded with an index) and the real shapes of each
// size, with random weights at realistic scales. Deterministic per seed: every
// tensor draws from its own stream, seeded by (seed, tensor name).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/config.h"
#include "checkpoint/safetensors.h"

namespace deltagen {

// Dense: tiny (the golden checkpoint's shapes), 0.8b, 2b, 4b, 9b, 27b; mixture of
// experts: tiny-moe (shared/golden/moe/tiny-moe-a's shapes), 35b-a3b,
// 122b-a10b, 397b-a17b. Throws Error for others.
ModelConfig synth_preset(const std::string& name);

// Adds the vision tower of `preset`'s size (vision_config, the image token
// ids, mrope_section): the tiny golden tower for "tiny", Qwen3.5-0.8B's for
// "0.8b", the 4B's for the others. The checkpoint then also gets
// model.visual.* tensors and a preprocessor_config.json.
void add_vision_tower(ModelConfig& cfg, const std::string& preset);

// A config with mtp_num_hidden_layers > 0 (synth --mtp sets 1, as released)
// also gets the multi-token-prediction head's mtp.* tensors.

// Changes the depth, keeping the 3 linear : 1 full layer pattern.
void set_num_layers(ModelConfig& cfg, int64_t layers);

struct SynthOptions {
  uint64_t seed = 0;
  DType dtype = DType::BF16;
  bool vl_layout = true;            // config nested in text_config, "model.language_model." names
  int64_t shard_bytes = 4ll << 30;  // split into model-0000k-of-0000n.safetensors above this
  bool progress = false;            // progress lines on stderr
  ExpertLayout expert_layout = ExpertLayout::Fused;  // MoE: fused 3-D tensors as published, or per expert
  // Tokenizer files (tokenizer.json, tokenizer_config.json, ...) copied from
  // this folder into the checkpoint; empty = none.
  std::filesystem::path tokenizer_dir;
};

// Fits a synthetic config to a real tokenizer: vocab_size becomes the
// tokenizer's id count (so every id the model can emit decodes) and the EOS
// ids become the tokenizer's eos token and <|endoftext|>. Throws Error naming
// `tokenizer_dir` if it holds no loadable tokenizer.
void fit_config_to_tokenizer(ModelConfig& cfg, const std::filesystem::path& tokenizer_dir);

// Writes config.json and the weights into out_dir atomically.
void write_synthetic_checkpoint(const ModelConfig& cfg, const SynthOptions& opts, const std::filesystem::path& out_dir);

}  // namespace deltagen
