#include "checkpoint/checkpoint.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "deltagen/error.h"

namespace deltagen {
namespace fs = std::filesystem;
namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// "model.language_model.layers.0.x" -> "layers.0.x"; "" for tensors the text
// model does not use (vision tower, multi-token-prediction head).
std::string canonical_name(const std::string& stored) {
  auto starts = [&](const char* p) { return stored.rfind(p, 0) == 0; };
  if (starts("model.visual.") || starts("visual.") || starts("mtp.") || starts("model.mtp.")) return "";
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

}  // namespace

std::vector<TensorSpec> qwen35_tensor_specs(const ModelConfig& c) {
  const int64_t H = c.hidden_size;
  std::vector<TensorSpec> specs;
  specs.push_back({"embed_tokens.weight", {c.vocab_size, H}});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    specs.push_back({p + "input_layernorm.weight", {H}});
    if (c.is_full(i)) {
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
    specs.push_back({p + "mlp.gate_proj.weight", {c.intermediate_size, H}});
    specs.push_back({p + "mlp.up_proj.weight", {c.intermediate_size, H}});
    specs.push_back({p + "mlp.down_proj.weight", {H, c.intermediate_size}});
  }
  specs.push_back({"norm.weight", {H}});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, H}});
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

  for (const auto& spec : qwen35_tensor_specs(ck->config_)) {
    auto it = ck->tensors_.find(spec.name);
    if (it == ck->tensors_.end())
      fail(dir.string(), "tensor " + spec.name + " is missing from the safetensors files (config.json needs it)");
    if (it->second.shape != spec.shape)
      fail(it->second.file.string(), "tensor " + it->second.name + " has shape " + shape_str(it->second.shape) +
                                         " but config.json implies " + shape_str(spec.shape));
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
                        "chat_template.jinja", "chat_template.json"})
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
