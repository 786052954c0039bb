#include "synth/synth.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "deltagen/error.h"
#include "util/half.h"

namespace deltagen {
namespace fs = std::filesystem;
namespace {

// splitmix64: tiny, fast, and the same on every platform (std:: distributions are not).
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double normal() {  // Box-Muller; one value per call keeps the stream simple
    double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
  }
};

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Fills one tensor with values at the scale a trained model of this shape has.
void fill_tensor(const TensorSpec& spec, const ModelConfig& cfg, uint64_t seed, std::vector<float>& out) {
  Rng rng{seed ^ name_hash(spec.name)};
  const std::string& n = spec.name;
  size_t count = 1;
  for (auto d : spec.shape) count *= size_t(d);
  out.resize(count);
  if (n.rfind("visual.", 0) == 0) {  // the vision tower: LayerNorms with bias, biased Linears
    const bool norm = n.find("norm") != std::string::npos;
    if (norm && ends_with(n, ".weight")) {
      for (auto& x : out) x = float(1.0 + 0.1 * rng.normal());
    } else if (ends_with(n, ".bias")) {
      for (auto& x : out) x = float(0.02 * rng.normal());
    } else if (n == "visual.pos_embed.weight") {
      for (auto& x : out) x = float(0.02 * rng.normal());
    } else {  // Linear / Conv3d weights: fan_in is everything but the first dimension
      double fan_in = double(count) / double(spec.shape[0]);
      double std = 1.0 / std::sqrt(fan_in);
      for (auto& x : out) x = float(std * rng.normal());
    }
  } else if (ends_with(n, "linear_attn.A_log")) {         // A ~ U(1, 16): decays from slow to fast
    for (auto& x : out) x = float(std::log(1.0 + 15.0 * rng.uniform()));
  } else if (ends_with(n, "linear_attn.dt_bias")) {  // inverse softplus of dt ~ logU(1e-3, 1e-1)
    for (auto& x : out) {
      double dt = std::exp(std::log(1e-3) + rng.uniform() * (std::log(1e-1) - std::log(1e-3)));
      x = float(dt + std::log(-std::expm1(-dt)));
    }
  } else if (ends_with(n, "linear_attn.norm.weight")) {  // plain weight around 1
    for (auto& x : out) x = float(1.0 + 0.1 * rng.normal());
  } else if (ends_with(n, "norm.weight")) {  // offset RMSNorm: stored values are offsets from 1
    for (auto& x : out) x = float(0.1 * rng.normal());
  } else if (ends_with(n, "conv1d.weight")) {
    double bound = 1.0 / std::sqrt(double(cfg.linear_conv_kernel_dim));
    for (auto& x : out) x = float(bound * (2.0 * rng.uniform() - 1.0));
  } else if (n == "embed_tokens.weight" || n == "lm_head.weight") {
    double std = 1.0 / std::sqrt(double(cfg.hidden_size));  // logits of O(1) after the final norm
    for (auto& x : out) x = float(std * rng.normal());
  } else {  // projections: fan_in is the last dimension
    double std = 0.5 / std::sqrt(double(spec.shape.back()));
    for (auto& x : out) x = float(std * rng.normal());
  }
}

std::string stored_name(const std::string& canonical, bool vl_layout) {
  if (canonical == "lm_head.weight") return canonical;
  if (canonical.rfind("visual.", 0) == 0) return "model." + canonical;
  if (canonical.rfind("mtp.", 0) == 0) return canonical;  // top level in every layout, as released
  return (vl_layout ? "model.language_model." : "model.") + canonical;
}

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  return buf;
}

}  // namespace

namespace {

// The dense sizes: Qwen3.5-0.8B .. 27B (Qwen3.6-27B has the 27B's shapes).
bool dense_preset(const std::string& name, ModelConfig& c) {
  struct Size { const char* name; int64_t hidden, layers, inter, heads, kv, nv; bool tied; };
  static const Size kSizes[] = {
      {"0.8b", 1024, 24, 3584, 8, 2, 16, true},
      {"2b", 2048, 24, 6144, 8, 2, 16, true},
      {"4b", 2560, 32, 9216, 16, 4, 32, true},
      {"9b", 4096, 32, 12288, 16, 4, 32, false},
      {"27b", 5120, 64, 17408, 24, 4, 48, false},  // Qwen3.5-27B / Qwen3.6-27B
  };
  for (const auto& s : kSizes) {
    if (name != s.name) continue;
    c.hidden_size = s.hidden;
    c.intermediate_size = s.inter;
    c.num_hidden_layers = s.layers;
    c.num_attention_heads = s.heads;
    c.num_key_value_heads = s.kv;
    c.linear_num_value_heads = s.nv;
    c.tie_word_embeddings = s.tied;
    return true;
  }
  return false;
}

// The mixture-of-experts sizes (shared/golden/moe/README.md 1.3); all untied.
bool moe_preset(const std::string& name, ModelConfig& c) {
  struct Size { const char* name; int64_t hidden, layers, heads, nv, experts, top_k, inter; };
  static const Size kSizes[] = {
      {"35b-a3b", 2048, 40, 16, 32, 256, 8, 512},
      {"122b-a10b", 3072, 48, 32, 64, 256, 8, 1024},
      {"397b-a17b", 4096, 60, 32, 64, 512, 10, 1024},
  };
  for (const auto& s : kSizes) {
    if (name != s.name) continue;
    c.model_type = "qwen3_5_moe";
    c.architecture = "Qwen3_5MoeForConditionalGeneration";
    c.hidden_size = s.hidden;
    c.num_hidden_layers = s.layers;
    c.num_attention_heads = s.heads;
    c.num_key_value_heads = 2;
    c.linear_num_value_heads = s.nv;
    c.num_experts = s.experts;
    c.num_experts_per_tok = s.top_k;
    c.moe_intermediate_size = c.shared_expert_intermediate_size = s.inter;
    c.tie_word_embeddings = false;
    return true;
  }
  return false;
}

}  // namespace

ModelConfig synth_preset(const std::string& name) {
  ModelConfig c;
  c.model_type = "qwen3_5";
  c.architecture = "Qwen3_5ForConditionalGeneration";
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e7;
  c.partial_rotary_factor = 0.25;
  c.linear_conv_kernel_dim = 4;
  if (name == "tiny" || name == "tiny-moe") {  // the golden checkpoints' shapes
    c.vocab_size = 512;
    c.hidden_size = 64;
    c.num_hidden_layers = 4;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 16;
    c.linear_num_key_heads = 2;
    c.linear_num_value_heads = 4;
    c.linear_key_head_dim = c.linear_value_head_dim = 16;
    c.max_position_embeddings = 4096;
    c.tie_word_embeddings = true;
    c.eos_token_ids = {511};
    if (name == "tiny") {
      c.intermediate_size = 128;
    } else {
      c.model_type = "qwen3_5_moe";
      c.architecture = "Qwen3_5MoeForConditionalGeneration";
      c.num_experts = 8;
      c.num_experts_per_tok = 2;
      c.moe_intermediate_size = 32;
      c.shared_expert_intermediate_size = 48;
    }
  } else {
    if (!dense_preset(name, c) && !moe_preset(name, c))
      fail("--preset", "unknown preset '" + name +
                           "' (expected tiny, 0.8b, 2b, 4b, 9b, 27b, tiny-moe, 35b-a3b, 122b-a10b or 397b-a17b)");
    c.vocab_size = 248320;
    c.head_dim = 256;
    c.linear_num_key_heads = 16;
    c.linear_key_head_dim = c.linear_value_head_dim = 128;
    c.max_position_embeddings = 262144;
    c.eos_token_ids = {248044};
  }
  set_num_layers(c, c.num_hidden_layers);
  return c;
}

void fit_config_to_tokenizer(ModelConfig& cfg, const fs::path& tokenizer_dir) {
  const Tokenizer tok = Tokenizer::load(tokenizer_dir);
  cfg.vocab_size = tok.vocab_size();
  cfg.eos_token_ids.clear();
  if (auto eos = tok.eos_token_id()) cfg.eos_token_ids.push_back(*eos);
  if (auto end = tok.token_to_id("<|endoftext|>"); end && (cfg.eos_token_ids.empty() || *end != cfg.eos_token_ids[0]))
    cfg.eos_token_ids.push_back(*end);
  if (cfg.eos_token_ids.empty()) fail(tokenizer_dir.string(), "the tokenizer names no eos_token and has no <|endoftext|>");
}

void add_vision_tower(ModelConfig& c, const std::string& preset) {
  VisionConfig v;
  if (preset == "tiny") {  // shared/golden/vision/tiny-vl's tower
    v.depth = 2, v.hidden_size = 32, v.num_heads = 2, v.intermediate_size = 64, v.num_position_embeddings = 64;
    c.image_token_id = 12, c.video_token_id = 13, c.vision_start_token_id = 10, c.vision_end_token_id = 11;
  } else {
    // Qwen3.5-0.8B's vision_config (shared/golden/vision/README.md); the 4B
    // record gives depth 24, hidden 1024, 16 heads, 4096; larger sizes use that one too.
    const bool small = preset == "0.8b";
    v.depth = small ? 12 : 24;
    v.hidden_size = small ? 768 : 1024;
    v.num_heads = small ? 12 : 16;
    v.intermediate_size = small ? 3072 : 4096;
    v.num_position_embeddings = 2304;
    c.image_token_id = 248056, c.video_token_id = 248057, c.vision_start_token_id = 248053,
    c.vision_end_token_id = 248054;
  }
  v.out_hidden_size = c.hidden_size;
  c.vision = v;
  const int64_t pairs = c.rotary_dim() / 2;  // split over T/H/W as the real configs do (32 -> 11, 11, 10)
  c.mrope_section = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3};
}

void set_num_layers(ModelConfig& c, int64_t layers) {
  if (layers <= 0 || layers > 1024) fail("--layers", "must be between 1 and 1024");
  c.num_hidden_layers = layers;
  c.layer_types.clear();
  for (int64_t i = 0; i < layers; ++i) c.layer_types.push_back((i + 1) % 4 == 0 ? LayerKind::Full : LayerKind::Linear);
}

void write_synthetic_checkpoint(const ModelConfig& cfg, const SynthOptions& opts, const fs::path& out_dir) {
  std::vector<TensorSpec> specs = qwen35_tensor_specs(cfg, opts.expert_layout);
  for (auto& spec : qwen35_vision_tensor_specs(cfg)) specs.push_back(std::move(spec));
  for (auto& spec : qwen35_mtp_tensor_specs(cfg, opts.expert_layout)) specs.push_back(std::move(spec));
  const size_t esize = dtype_size(opts.dtype);

  // Group tensors into shards of at most opts.shard_bytes (a tensor never splits).
  std::vector<std::vector<size_t>> shards(1);
  std::vector<size_t> shard_size(1, 0);
  double total = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    size_t bytes = esize;
    for (auto d : specs[i].shape) bytes *= size_t(d);
    if (!shards.back().empty() && shard_size.back() + bytes > size_t(opts.shard_bytes)) {
      shards.emplace_back();
      shard_size.push_back(0);
    }
    shards.back().push_back(i);
    shard_size.back() += bytes;
    total += double(bytes);
  }

  std::vector<fs::path> tokenizer_files;
  if (!opts.tokenizer_dir.empty()) {
    tokenizer_files = tokenizer_files_in(opts.tokenizer_dir);
    if (!fs::is_regular_file(opts.tokenizer_dir / "tokenizer.json"))
      fail(opts.tokenizer_dir.string(), "no tokenizer.json in this folder");
  }

  AtomicDir dir(out_dir);
  write_file_atomic(dir.path() / "config.json", config_to_json(cfg, opts.vl_layout).dump(2) + "\n");
  copy_files_into(tokenizer_files, dir.path());
  if (cfg.vision) {  // the released Qwen3.5 processor settings
    const VisionConfig& v = *cfg.vision;
    const nlohmann::json pre = {{"image_mean", {0.5, 0.5, 0.5}},      {"image_std", {0.5, 0.5, 0.5}},
                                {"merge_size", v.spatial_merge_size}, {"patch_size", v.patch_size},
                                {"temporal_patch_size", v.temporal_patch_size},
                                {"size", {{"longest_edge", 16777216}, {"shortest_edge", 65536}}},
                                {"do_rescale", true},                 {"rescale_factor", 1.0 / 255.0},
                                {"do_normalize", true},               {"do_resize", true},
                                {"resample", 3},                      {"do_convert_rgb", true}};
    write_file_atomic(dir.path() / "preprocessor_config.json", pre.dump(2) + "\n");
  }

  nlohmann::json weight_map = nlohmann::json::object();
  std::vector<float> values;
  std::vector<uint16_t> halves;
  double written = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    char shard_name[64];
    if (shards.size() == 1) std::snprintf(shard_name, sizeof shard_name, "model.safetensors");
    else std::snprintf(shard_name, sizeof shard_name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());

    std::vector<TensorToWrite> layout;
    for (size_t i : shards[s]) {
      TensorToWrite t;
      t.name = stored_name(specs[i].name, opts.vl_layout);
      t.dtype = opts.dtype;
      t.shape = specs[i].shape;
      t.nbytes = esize;
      for (auto d : t.shape) t.nbytes *= size_t(d);
      layout.push_back(t);
      weight_map[t.name] = shard_name;
    }
    SafetensorsWriter writer(dir.path() / shard_name, layout, {{"format", "pt"}});
    for (size_t k = 0; k < shards[s].size(); ++k) {
      fill_tensor(specs[shards[s][k]], cfg, opts.seed, values);
      if (opts.dtype == DType::F32) {
        writer.write_next(values.data(), values.size() * 4);
      } else {
        halves.resize(values.size());
        for (size_t j = 0; j < values.size(); ++j)
          halves[j] = opts.dtype == DType::BF16 ? f32_to_bf16(values[j]) : f32_to_f16(values[j]);
        writer.write_next(halves.data(), halves.size() * 2);
      }
      written += double(layout[k].nbytes);
      if (opts.progress)
        std::fprintf(stderr, "\rsynth: %s / %s", human_bytes(written).c_str(), human_bytes(total).c_str());
    }
    writer.commit();
  }
  if (opts.progress) std::fprintf(stderr, "\n");
  if (shards.size() > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", int64_t(total)}}}, {"weight_map", weight_map}};
    write_file_atomic(dir.path() / "model.safetensors.index.json", index.dump(2) + "\n");
  }
  dir.commit();
}

}  // namespace deltagen
