// The Qwen3.5 text-model settings deltagen needs, read from a Hugging Face
// config.json in either layout:
//   - VL checkpoint: top-level model_type "qwen3_5", LLM settings in text_config;
//   - text-only:     model_type "qwen3_5_text" at the top level;
// and the same two for the mixture-of-experts family (qwen3_5_moe /
// qwen3_5_moe_text), whose every layer's MLP is a routed MoE block.
#pragma once
#include <cstdint>
#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace deltagen {

enum class LayerKind { Linear, Full };  // Gated DeltaNet / gated full attention

// Upper bounds parse_config enforces, far above any real model. They keep
// every size derived from a config inside int64 (a product of two sizes is
// below 2^48) and bound what is sized or looped over by the layer count, so a
// hostile config.json is refused before anything is allocated from it.
inline constexpr int64_t kMaxConfigSize = int64_t(1) << 24;  // any width, count or length
inline constexpr int64_t kMaxConfigLayers = 4096;

// The vision tower of a VL checkpoint (`vision_config`, model.visual.*):
// Conv3d patch embedding, a learned position table resampled to the image,
// `depth` pre-norm ViT blocks with 2-D rotary, then a 2x2 patch merger into
// the text model's width. shared/golden/vision/README.md section 2 has the math.
struct VisionConfig {
  int64_t depth = 0;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t in_channels = 3;
  int64_t patch_size = 16;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t out_hidden_size = 0;          // = the text model's hidden_size
  int64_t num_position_embeddings = 0;  // a square table: side = sqrt(this)
  double rope_theta = 10000.0;          // HF's default; checkpoints do not store it
  double layer_norm_eps = 1e-6;

  int64_t head_dim() const { return hidden_size / num_heads; }
  int64_t position_side() const;                 // sqrt(num_position_embeddings)
  int64_t patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }  // patches per image token
};

struct ModelConfig {
  std::string model_type;     // top-level: "qwen3_5", "qwen3_5_text", "qwen3_5_moe" or "qwen3_5_moe_text"
  std::string architecture;   // architectures[0], may be empty

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // dense MLP width; 0 in a MoE model
  int64_t num_hidden_layers = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;

  // full attention
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  double partial_rotary_factor = 1.0;
  double rope_theta = 10000.0;
  bool attn_output_gate = true;

  // Gated DeltaNet (linear attention)
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 0;

  std::vector<LayerKind> layer_types;  // size num_hidden_layers

  // Mixture of experts (every layer) when num_experts > 0: a router picks
  // num_experts_per_tok of num_experts SwiGLU experts (moe_intermediate_size
  // wide) per token, plus one always-on shared expert scaled by a sigmoid gate.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;

  // Multimodal (VL layout with a vision_config): the tower, the placeholder
  // token ids, and the interleaved M-RoPE split of the rotary frequencies
  // over the (T, H, W) position streams. Text-only configs leave vision empty;
  // mrope_section is read whenever the config has it.
  std::optional<VisionConfig> vision;
  int64_t image_token_id = -1;
  int64_t video_token_id = -1;
  int64_t vision_start_token_id = -1;
  int64_t vision_end_token_id = -1;
  std::array<int64_t, 3> mrope_section{0, 0, 0};  // all 0: every frequency uses the T stream

  // Multi-token prediction (docs/speculative.md): mtp_num_hidden_layers
  // full-attention layers after a fc over [embedding, hidden] (mtp.* tensors),
  // sharing the embedding and lm_head. Released Qwen3.5/3.6 configs say 1;
  // re-quantized uploads may say 1 and ship no mtp.* tensors (the checkpoint
  // then has no head). Qwen3-Next calls it num_nextn_predict_layers.
  int64_t mtp_num_hidden_layers = 0;

  std::vector<int64_t> eos_token_ids;  // may be empty
  int64_t bos_token_id = -1;           // -1: none
  int64_t pad_token_id = -1;

  // derived
  int64_t rotary_dim() const { return int64_t(double(head_dim) * partial_rotary_factor); }
  int64_t linear_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t linear_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t conv_dim() const { return 2 * linear_key_dim() + linear_value_dim(); }
  bool is_moe() const { return num_experts > 0; }
  bool is_full(int64_t layer) const { return layer_types.at(size_t(layer)) == LayerKind::Full; }
  int64_t num_full_layers() const;
  int64_t num_linear_layers() const { return num_hidden_layers - num_full_layers(); }
};

// Throws Error("<origin>: <problem>") on a missing key, a wrong type, an
// unknown model_type or an inconsistent value (e.g. heads not dividing).
ModelConfig parse_config(const nlohmann::json& j, const std::string& origin);
ModelConfig load_config(const std::filesystem::path& config_json);

// The text-only (qwen3_5_text / qwen3_5_moe_text) config.json for `cfg`, as
// `synth` writes it; with `vl_layout`, nested in text_config as published.
nlohmann::json config_to_json(const ModelConfig& cfg, bool vl_layout);

}  // namespace deltagen
