#include "checkpoint/checkpoint.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "deltagen/error.h"
#include "util/number_text.h"

namespace deltagen {
namespace fs = std::filesystem;
namespace {

// "model.language_model.layers.0.x" -> "layers.0.x", "model.visual.x" ->
// "visual.x", "model.mtp.x" -> "mtp.x" (the multi-token-prediction head).
std::string canonical_name(const std::string& stored) {
  auto starts = [&](const char* p) { return stored.rfind(p, 0) == 0; };
  if (starts("model.mtp.")) return stored.substr(std::strlen("model."));
  if (starts("model.visual.")) return stored.substr(std::strlen("model."));
  if (starts("model.language_model.")) return stored.substr(std::strlen("model.language_model."));
  if (starts("model.")) return stored.substr(std::strlen("model."));
  if (starts("language_model.model.")) return stored.substr(std::strlen("language_model.model."));
  if (starts("language_model.")) return stored.substr(std::strlen("language_model."));
  return stored;  // lm_head.weight, or already canonical
}

// Shard file names from model.safetensors.index.json, validated.
std::vector<fs::path> shard_files(const fs::path& index_path) {
  const std::string file = index_path.string();
  std::ifstream in(index_path);
  if (!in) fail(file, "cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    fail(file, "not valid JSON");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(file, "missing 'weight_map' object");
  std::set<std::string> names;
  for (auto& [tensor, shard] : j["weight_map"].items()) {
    if (!shard.is_string()) fail(file, "weight_map entry for " + tensor + " is not a file name");
    std::string s = shard.get<std::string>();
    if (s.empty() || s.find('/') != std::string::npos || s == "..")
      fail(file, "weight_map names an invalid shard file '" + s + "'");
    names.insert(s);
  }
  if (names.empty()) fail(file, "weight_map is empty");
  std::vector<fs::path> out;
  for (const auto& n : names) out.push_back(index_path.parent_path() / n);
  return out;
}

// The MoE block of one layer ("layers.N.mlp."): router, routed experts in
// `layout`, shared expert and its gate.
void add_moe_specs(const ModelConfig& c, const std::string& m, ExpertLayout layout, std::vector<TensorSpec>& specs) {
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  const int64_t SI = c.shared_expert_intermediate_size;
  specs.push_back({m + "gate.weight", {E, H}});
  if (layout == ExpertLayout::Fused) {
    specs.push_back({m + "experts.gate_up_proj", {E, 2 * I, H}});
    specs.push_back({m + "experts.down_proj", {E, H, I}});
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      specs.push_back({x + "gate_proj.weight", {I, H}});
      specs.push_back({x + "up_proj.weight", {I, H}});
      specs.push_back({x + "down_proj.weight", {H, I}});
    }
  }
  specs.push_back({m + "shared_expert.gate_proj.weight", {SI, H}});
  specs.push_back({m + "shared_expert.up_proj.weight", {SI, H}});
  specs.push_back({m + "shared_expert.down_proj.weight", {H, SI}});
  specs.push_back({m + "shared_expert_gate.weight", {1, H}});
}

// The expert layout a MoE checkpoint uses (judged on layer 0; every layer is
// then checked against it), refusing a per-expert checkpoint with more experts
// than the config declares (fewer show up as a missing tensor).
ExpertLayout detect_expert_layout(const ModelConfig& c, const std::map<std::string, TensorInfo>& tensors,
                                  const fs::path& dir) {
  if (!c.is_moe() || tensors.count("layers.0.mlp.experts.gate_up_proj")) return ExpertLayout::Fused;
  if (!tensors.count("layers.0.mlp.experts.0.gate_proj.weight")) return ExpertLayout::Fused;  // reported as missing
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string extra = "layers." + std::to_string(i) + ".mlp.experts." + std::to_string(c.num_experts) +
                              ".gate_proj.weight";
    if (tensors.count(extra))
      fail(dir.string(), "tensor " + extra + " is expert " + std::to_string(c.num_experts) +
                             ", but config.json has num_experts " + std::to_string(c.num_experts));
  }
  return ExpertLayout::PerExpert;
}

// One decoder layer under prefix `p` ("layers.3.", "mtp.layers.0."): its
// mixer (gated full attention when `full`, else Gated DeltaNet), its norms
// and its MLP (MoE in a MoE model).
void add_layer_specs(const ModelConfig& c, const std::string& p, bool full, ExpertLayout experts,
                     std::vector<TensorSpec>& specs) {
  const int64_t H = c.hidden_size;
  specs.push_back({p + "input_layernorm.weight", {H}});
  if (full) {
    const std::string a = p + "self_attn.";
    const int64_t q_out = 2 * c.num_attention_heads * c.head_dim;  // query and gate, interleaved per head
    const int64_t kv_out = c.num_key_value_heads * c.head_dim;
    specs.push_back({a + "q_proj.weight", {q_out, H}});
    specs.push_back({a + "k_proj.weight", {kv_out, H}});
    specs.push_back({a + "v_proj.weight", {kv_out, H}});
    specs.push_back({a + "o_proj.weight", {H, c.num_attention_heads * c.head_dim}});
    specs.push_back({a + "q_norm.weight", {c.head_dim}});
    specs.push_back({a + "k_norm.weight", {c.head_dim}});
  } else {
    const std::string a = p + "linear_attn.";
    const int64_t nv = c.linear_num_value_heads;
    specs.push_back({a + "in_proj_qkv.weight", {c.conv_dim(), H}});
    specs.push_back({a + "in_proj_z.weight", {c.linear_value_dim(), H}});
    specs.push_back({a + "in_proj_b.weight", {nv, H}});
    specs.push_back({a + "in_proj_a.weight", {nv, H}});
    specs.push_back({a + "conv1d.weight", {c.conv_dim(), 1, c.linear_conv_kernel_dim}});
    specs.push_back({a + "A_log", {nv}});
    specs.push_back({a + "dt_bias", {nv}});
    specs.push_back({a + "norm.weight", {c.linear_value_head_dim}});
    specs.push_back({a + "out_proj.weight", {H, c.linear_value_dim()}});
  }
  specs.push_back({p + "post_attention_layernorm.weight", {H}});
  if (c.is_moe()) {
    add_moe_specs(c, p + "mlp.", experts, specs);
  } else {
    specs.push_back({p + "mlp.gate_proj.weight", {c.intermediate_size, H}});
    specs.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, H}});
    specs.push_back({p + "mlp.down_proj.weight", {H, c.intermediate_size}});
  }
}

}  // namespace

std::vector<TensorSpec> qwen35_tensor_specs(const ModelConfig& c, ExpertLayout experts) {
  const int64_t H = c.hidden_size;
  std::vector<TensorSpec> specs;
  specs.push_back({"embed_tokens.weight", {c.vocab_size, H}});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    add_layer_specs(c, "layers." + std::to_string(i) + ".", c.is_full(i), experts, specs);
  specs.push_back({"norm.weight", {H}});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, H}});
  return specs;
}

std::vector<TensorSpec> qwen35_mtp_tensor_specs(const ModelConfig& c, ExpertLayout experts) {
  const int64_t H = c.hidden_size;
  std::vector<TensorSpec> specs;
  if (c.mtp_num_hidden_layers <= 0) return specs;
  specs.push_back({"mtp.fc.weight", {H, 2 * H}});
  specs.push_back({"mtp.pre_fc_norm_embedding.weight", {H}});
  specs.push_back({"mtp.pre_fc_norm_hidden.weight", {H}});
  for (int64_t i = 0; i < c.mtp_num_hidden_layers; ++i)
    add_layer_specs(c, "mtp.layers." + std::to_string(i) + ".", /*full=*/true, experts, specs);
  specs.push_back({"mtp.norm.weight", {H}});
  return specs;
}

std::vector<TensorSpec> qwen35_vision_tensor_specs(const ModelConfig& c) {
  std::vector<TensorSpec> specs;
  if (!c.vision) return specs;
  const VisionConfig& v = *c.vision;
  const int64_t D = v.hidden_size, I = v.intermediate_size, M = D * v.merge_unit();
  specs.push_back({"visual.patch_embed.proj.weight",
                   {D, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size}});
  specs.push_back({"visual.patch_embed.proj.bias", {D}});
  specs.push_back({"visual.pos_embed.weight", {v.num_position_embeddings, D}});
  for (int64_t i = 0; i < v.depth; ++i) {
    const std::string b = "visual.blocks." + std::to_string(i) + ".";
    for (const char* n : {"norm1", "norm2"}) {
      specs.push_back({b + n + ".weight", {D}});
      specs.push_back({b + n + ".bias", {D}});
    }
    specs.push_back({b + "attn.qkv.weight", {3 * D, D}});
    specs.push_back({b + "attn.qkv.bias", {3 * D}});
    specs.push_back({b + "attn.proj.weight", {D, D}});
    specs.push_back({b + "attn.proj.bias", {D}});
    specs.push_back({b + "mlp.linear_fc1.weight", {I, D}});
    specs.push_back({b + "mlp.linear_fc1.bias", {I}});
    specs.push_back({b + "mlp.linear_fc2.weight", {D, I}});
    specs.push_back({b + "mlp.linear_fc2.bias", {D}});
  }
  specs.push_back({"visual.merger.norm.weight", {D}});
  specs.push_back({"visual.merger.norm.bias", {D}});
  specs.push_back({"visual.merger.linear_fc1.weight", {M, M}});
  specs.push_back({"visual.merger.linear_fc1.bias", {M}});
  specs.push_back({"visual.merger.linear_fc2.weight", {v.out_hidden_size, M}});
  specs.push_back({"visual.merger.linear_fc2.bias", {v.out_hidden_size}});
  return specs;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const fs::path& dir) {
  if (!fs::is_directory(dir)) fail(dir.string(), "checkpoint folder does not exist");
  auto ck = std::unique_ptr<Checkpoint>(new Checkpoint());
  ck->dir_ = dir;
  ck->config_ = load_config(dir / "config.json");

  std::vector<fs::path> files;
  if (fs::exists(dir / "model.safetensors.index.json")) files = shard_files(dir / "model.safetensors.index.json");
  else if (fs::exists(dir / "model.safetensors")) files = {dir / "model.safetensors"};
  else fail(dir.string(), "no model.safetensors or model.safetensors.index.json");

  for (const auto& f : files) {
    ck->files_.push_back(std::make_unique<SafetensorsFile>(f));
    for (const auto& [stored, info] : ck->files_.back()->tensors()) {
      std::string name = canonical_name(stored);
      if (name.empty()) continue;
      if (!ck->tensors_.emplace(name, info).second)
        fail(f.string(), "tensor " + stored + " appears twice in the checkpoint");
    }
  }

  ck->expert_layout_ = detect_expert_layout(ck->config_, ck->tensors_, dir);
  // The vision tower is checked when the checkpoint has one: a VL config
  // whose visual.* tensors were all stripped still builds as a text model.
  std::vector<TensorSpec> specs = qwen35_tensor_specs(ck->config_, ck->expert_layout_);
  bool any_visual = false;
  for (const auto& [name, info] : ck->tensors_) any_visual |= name.rfind("visual.", 0) == 0;
  ck->has_vision_ = ck->config_.vision && any_visual;
  if (ck->has_vision_)
    for (auto& spec : qwen35_vision_tensor_specs(ck->config_)) specs.push_back(std::move(spec));
  // The multi-token-prediction head, checked when the config declares one and
  // the files carry it (re-quantized uploads often drop mtp.*: no head then).
  bool any_mtp = false;
  for (const auto& [name, info] : ck->tensors_) any_mtp |= name.rfind("mtp.", 0) == 0;
  ck->has_mtp_ = ck->config_.mtp_num_hidden_layers > 0 && any_mtp;
  if (ck->has_mtp_)
    for (auto& spec : qwen35_mtp_tensor_specs(ck->config_, ck->expert_layout_)) specs.push_back(std::move(spec));
  for (const auto& spec : specs) {
    auto it = ck->tensors_.find(spec.name);
    if (it == ck->tensors_.end())
      fail(dir.string(), "tensor " + spec.name + " is missing from the safetensors files (config.json needs it)");
    if (it->second.shape != spec.shape)
      fail(it->second.file.string(), "tensor " + it->second.name + " has shape " + dims_text(it->second.shape) +
                                         " but config.json implies " + dims_text(spec.shape));
  }
  // A tied checkpoint may still carry lm_head.weight; the model ties it, so drop it.
  if (ck->config_.tie_word_embeddings) ck->tensors_.erase("lm_head.weight");
  return ck;
}

const TensorInfo& Checkpoint::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail(dir_.string(), "checkpoint has no tensor " + name);
  return it->second;
}

ExpertMatrix Checkpoint::expert_matrix(int64_t layer, int64_t e, ExpertPart part) const {
  const ModelConfig& c = config_;
  // Layers past the model's are the MTP head's (layer num_hidden_layers + j = mtp.layers.j).
  const int64_t head_layers = has_mtp_ ? c.mtp_num_hidden_layers : 0;
  if (!c.is_moe() || e < 0 || e >= c.num_experts || layer < 0 || layer >= c.num_hidden_layers + head_layers)
    fail(dir_.string(), "no expert " + std::to_string(e) + " in layer " + std::to_string(layer));
  const std::string m = (layer < c.num_hidden_layers ? "layers." + std::to_string(layer)
                                                     : "mtp.layers." + std::to_string(layer - c.num_hidden_layers)) +
                        ".mlp.experts.";
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size;
  ExpertMatrix x;
  if (expert_layout_ == ExpertLayout::PerExpert) {
    static const char* kNames[] = {"gate_proj.weight", "up_proj.weight", "down_proj.weight"};
    x.tensor = m + std::to_string(e) + "." + kNames[int(part)];
    const TensorInfo& t = info(x.tensor);
    x.data = t.data;
    x.dtype = t.dtype;
    x.rows = t.shape[0];
    x.cols = t.shape[1];
    return x;
  }
  x.tensor = m + (part == ExpertPart::Down ? "down_proj" : "gate_up_proj");
  const TensorInfo& t = info(x.tensor);
  const size_t esize = dtype_size(t.dtype);
  x.dtype = t.dtype;
  x.rows = part == ExpertPart::Down ? H : I;
  x.cols = part == ExpertPart::Down ? I : H;
  const int64_t per_expert = t.shape[1] * t.shape[2];
  const int64_t row0 = part == ExpertPart::Up ? I : 0;  // gate rows first, then up
  x.data = t.data + size_t(e * per_expert + row0 * x.cols) * esize;
  return x;
}

std::vector<float> Checkpoint::load_f32(const std::string& name) const {
  const TensorInfo& t = info(name);
  std::vector<float> out(size_t(t.numel()));
  convert_to_f32(t.dtype, t.data, out.size(), out.data());
  return out;
}

std::vector<double> Checkpoint::load_f64(const std::string& name) const {
  const TensorInfo& t = info(name);
  std::vector<double> out(size_t(t.numel()));
  convert_to_f64(t.dtype, t.data, out.size(), out.data());
  return out;
}

std::vector<fs::path> tokenizer_files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const char* n : {"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                        "special_tokens_map.json", "added_tokens.json", "generation_config.json",
                        "chat_template.jinja", "chat_template.json", "preprocessor_config.json"})
    if (fs::is_regular_file(dir / n)) out.push_back(dir / n);
  return out;
}

void copy_files_into(const std::vector<fs::path>& files, const fs::path& dir) {
  for (const fs::path& src : files) {
    std::error_code ec;
    fs::copy_file(src, dir / src.filename(), fs::copy_options::overwrite_existing, ec);
    if (ec) fail(src.string(), "cannot copy into " + dir.string() + ": " + ec.message());
  }
}

}  // namespace deltagen
