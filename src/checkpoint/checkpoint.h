// A Hugging Face Qwen3.5 checkpoint folder: config.json plus one
// model.safetensors or shards listed in model.safetensors.index.json. Files
// are memory-mapped; tensors are validated against the config on open.
//
// Tensor names are canonical, i.e. relative to the text model:
//   "embed_tokens.weight", "norm.weight", "lm_head.weight",
//   "layers.3.self_attn.q_proj.weight", "layers.0.linear_attn.A_log", ...
// The prefixes "model.language_model." and "model." are stripped on load, so
// the vision tower's tensors are "visual.blocks.0.attn.qkv.weight", ... and
// the multi-token-prediction head's "mtp.fc.weight", "mtp.layers.0.*", ...
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/safetensors.h"

namespace deltagen {

// One expected tensor of the Qwen3.5 text model, with its shape from the config.
struct TensorSpec {
  std::string name;  // canonical
  std::vector<int64_t> shape;
};
// How a MoE checkpoint stores its routed experts: fused, one pair of 3-D
// tensors per layer as published (mlp.experts.gate_up_proj [E, 2I, H], rows
// gate then up; mlp.experts.down_proj [E, H, I]), or one Linear per expert as
// some fine-tunes save them (mlp.experts.{e}.{gate,up,down}_proj.weight).
enum class ExpertLayout { Fused, PerExpert };

// Every tensor the model needs (lm_head.weight only when not tied), in a
// stable order: embeddings, layers 0..N-1, final norm, lm_head.
std::vector<TensorSpec> qwen35_tensor_specs(const ModelConfig& cfg, ExpertLayout experts = ExpertLayout::Fused);

// Every tensor of the multi-token-prediction head (docs/speculative.md):
// mtp.fc [H, 2H] over [embedding, hidden], its two input norms, then
// mtp_num_hidden_layers gated full-attention layers "mtp.layers.N." shaped
// like the model's (MoE MLP in a MoE model), then mtp.norm; empty when the
// config declares none.
std::vector<TensorSpec> qwen35_mtp_tensor_specs(const ModelConfig& cfg, ExpertLayout experts = ExpertLayout::Fused);

// Every tensor of the vision tower (canonical "visual.*" names); empty for a
// config without vision_config.
std::vector<TensorSpec> qwen35_vision_tensor_specs(const ModelConfig& cfg);

// One routed expert's matrix, wherever it is stored: `rows` x `cols` values
// of `dtype` from `data` (row-major), inside checkpoint tensor `tensor`.
enum class ExpertPart { Gate, Up, Down };  // [I, H], [I, H], [H, I]
struct ExpertMatrix {
  const uint8_t* data = nullptr;
  DType dtype{};
  int64_t rows = 0, cols = 0;
  std::string tensor;  // canonical name of the tensor holding it
};

// The tokenizer and generation files (tokenizer.json, tokenizer_config.json,
// chat template, ...) present in `dir`.
std::vector<std::filesystem::path> tokenizer_files_in(const std::filesystem::path& dir);

// Copies `files` into `dir`; throws Error naming the file that fails.
void copy_files_into(const std::vector<std::filesystem::path>& files, const std::filesystem::path& dir);

class Checkpoint {
 public:
  // Throws Error naming the file and the problem.
  static std::unique_ptr<Checkpoint> open(const std::filesystem::path& dir);

  const ModelConfig& config() const { return config_; }
  // A vision_config and the visual.* tensors it needs (all checked on open).
  bool has_vision() const { return has_vision_; }
  // A multi-token-prediction head: the config declares one and the mtp.*
  // tensors are there (all checked on open).
  bool has_mtp() const { return has_mtp_; }
  const std::filesystem::path& dir() const { return dir_; }

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // throws Error if missing
  // The tensor converted to fp32 / fp64 (any stored dtype).
  std::vector<float> load_f32(const std::string& name) const;
  std::vector<double> load_f64(const std::string& name) const;

  // MoE only: how the routed experts are stored, and expert `e`'s `part` in
  // layer `layer` (num_hidden_layers + j: the MTP head's layer j).
  ExpertLayout expert_layout() const { return expert_layout_; }
  ExpertMatrix expert_matrix(int64_t layer, int64_t e, ExpertPart part) const;

  // "lm_head.weight" when the checkpoint has one, else "embed_tokens.weight".
  std::string lm_head_name() const { return has("lm_head.weight") ? "lm_head.weight" : "embed_tokens.weight"; }

  // All files that belong to the checkpoint besides weights (tokenizer etc.)
  // that a build should copy next to the model.
  std::vector<std::filesystem::path> tokenizer_files() const { return tokenizer_files_in(dir_); }

 private:
  std::filesystem::path dir_;
  ModelConfig config_;
  ExpertLayout expert_layout_ = ExpertLayout::Fused;
  bool has_vision_ = false;
  bool has_mtp_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace deltagen
