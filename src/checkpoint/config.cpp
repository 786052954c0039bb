#include "checkpoint/config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "deltagen/error.h"

namespace deltagen {
namespace {

using nlohmann::json;

// Reads config keys with errors that name the file and the key.
class ConfigReader {
 public:
  ConfigReader(const json& j, std::string origin, std::string prefix)
      : j_(j), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int64_t positive_int(const char* key, int64_t max = kMaxConfigSize) const {
    const json& v = at(key);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0)
      bad(key, "must be a positive integer, got " + v.dump());
    if (v.get<int64_t>() > max) bad(key, "is " + v.dump() + ", more than the supported " + std::to_string(max));
    return v.get<int64_t>();
  }

  double number(const char* key) const {
    const json& v = at(key);
    if (!v.is_number()) bad(key, "must be a number, got " + v.dump());
    return v.get<double>();
  }

  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean()) bad(key, "must be true or false, got " + v.dump());
    return v.get<bool>();
  }

  std::string string(const char* key) const {
    const json& v = at(key);
    if (!v.is_string()) bad(key, "must be a string, got " + v.dump());
    return v.get<std::string>();
  }

  const json& at(const char* key) const {
    if (!has(key)) fail(origin_, "missing key '" + prefix_ + key + "'");
    return j_.at(key);
  }

  [[noreturn]] void bad(const std::string& key, const std::string& problem) const {
    fail(origin_, "'" + prefix_ + key + "' " + problem);
  }

 private:
  const json& j_;
  std::string origin_, prefix_;
};

std::vector<int64_t> token_ids(const json& v, const std::string& origin, const char* key) {
  std::vector<int64_t> ids;
  if (v.is_null()) return ids;
  if (v.is_number_integer()) return {v.get<int64_t>()};
  if (v.is_array()) {
    for (const auto& x : v) {
      if (!x.is_number_integer()) fail(origin, std::string("'") + key + "' must hold integers");
      ids.push_back(x.get<int64_t>());
    }
    return ids;
  }
  fail(origin, std::string("'") + key + "' must be an integer, a list or null");
}

std::vector<LayerKind> read_layer_types(const ConfigReader& r, int64_t layers, const std::string& origin) {
  std::vector<LayerKind> kinds;
  if (r.has("layer_types")) {
    const json& lt = r.at("layer_types");
    if (!lt.is_array()) r.bad("layer_types", "must be a list");
    for (const auto& t : lt) {
      std::string s = t.is_string() ? t.get<std::string>() : t.dump();
      if (s == "linear_attention") kinds.push_back(LayerKind::Linear);
      else if (s == "full_attention") kinds.push_back(LayerKind::Full);
      else r.bad("layer_types", "has unknown layer type '" + s + "' (expected linear_attention or full_attention)");
    }
    if (int64_t(kinds.size()) != layers)
      fail(origin, "'layer_types' has " + std::to_string(kinds.size()) + " entries but num_hidden_layers is " +
                       std::to_string(layers));
  } else if (r.has("full_attention_interval")) {
    int64_t interval = r.positive_int("full_attention_interval");
    for (int64_t i = 0; i < layers; ++i)
      kinds.push_back((i + 1) % interval == 0 ? LayerKind::Full : LayerKind::Linear);
  } else {
    fail(origin, "missing key 'layer_types' (or 'full_attention_interval')");
  }
  return kinds;
}

void check_divides(int64_t a, int64_t b, const char* what_a, const char* what_b, const std::string& origin) {
  if (b % a != 0)
    fail(origin, std::string(what_b) + " (" + std::to_string(b) + ") is not a multiple of " + what_a + " (" +
                     std::to_string(a) + ")");
}

// The routed-expert keys. Hugging Face has no norm_topk_prob for Qwen3.5-MoE
// and always renormalises the top-k weights; a config that says false is
// refused rather than silently run with the other math.
void read_moe(const ConfigReader& r, ModelConfig& c) {
  c.num_experts = r.positive_int("num_experts");
  c.num_experts_per_tok = r.positive_int("num_experts_per_tok");
  if (c.num_experts_per_tok > c.num_experts)
    r.bad("num_experts_per_tok", "is " + std::to_string(c.num_experts_per_tok) + ", more than num_experts (" +
                                     std::to_string(c.num_experts) + ")");
  c.moe_intermediate_size = r.positive_int("moe_intermediate_size");
  c.shared_expert_intermediate_size = r.positive_int("shared_expert_intermediate_size");
  if (!r.boolean("norm_topk_prob", true))
    r.bad("norm_topk_prob", "false is not supported (Qwen3.5-MoE always renormalises the top-k weights)");
  if (r.has("mlp_only_layers") && !r.at("mlp_only_layers").empty())
    r.bad("mlp_only_layers", "is not supported (every Qwen3.5-MoE layer is a MoE layer)");
}

// vision_config of a VL checkpoint. Only the plain Qwen3.5 tower is
// accepted: no deepstack, gelu_pytorch_tanh MLP, a square position table.
VisionConfig read_vision(const ConfigReader& r, const std::string& origin) {
  VisionConfig v;
  v.depth = r.positive_int("depth", kMaxConfigLayers);
  v.hidden_size = r.positive_int("hidden_size");
  v.num_heads = r.positive_int("num_heads");
  v.intermediate_size = r.positive_int("intermediate_size");
  if (r.has("in_channels")) v.in_channels = r.positive_int("in_channels", 16);
  v.patch_size = r.positive_int("patch_size", 1024);
  v.temporal_patch_size = r.has("temporal_patch_size") ? r.positive_int("temporal_patch_size", 64) : 2;
  v.spatial_merge_size = r.positive_int("spatial_merge_size", 64);
  v.out_hidden_size = r.positive_int("out_hidden_size");
  v.num_position_embeddings = r.positive_int("num_position_embeddings");
  if (v.position_side() * v.position_side() != v.num_position_embeddings)
    r.bad("num_position_embeddings", "must be a square number, got " + std::to_string(v.num_position_embeddings));
  if (v.hidden_size % v.num_heads != 0 || v.head_dim() % 4 != 0)
    r.bad("num_heads", "must divide hidden_size into heads of a multiple of 4 (2-D rotary), got " +
                           std::to_string(v.num_heads) + " for hidden_size " + std::to_string(v.hidden_size));
  if (r.has("hidden_act") && r.string("hidden_act") != "gelu_pytorch_tanh")
    r.bad("hidden_act", "'" + r.string("hidden_act") + "' is not supported (expected gelu_pytorch_tanh)");
  if (r.has("deepstack_visual_indexes") && !r.at("deepstack_visual_indexes").empty())
    r.bad("deepstack_visual_indexes", "is not supported (Qwen3.5's tower has no deepstack)");
  if (r.has("rope_theta")) v.rope_theta = r.number("rope_theta");
  if (!(v.rope_theta > 0)) r.bad("rope_theta", "must be positive");
  (void)origin;
  return v;
}

// rope_parameters.mrope_section: three non-negative counts whose sum is at
// most rotary_dim / 2 (the frequencies the interleave hands out).
std::array<int64_t, 3> read_mrope_section(const ConfigReader& rr, int64_t rotary_dim) {
  std::array<int64_t, 3> s{0, 0, 0};
  if (!rr.has("mrope_section")) return s;
  const json& v = rr.at("mrope_section");
  if (!v.is_array() || v.size() != 3) rr.bad("mrope_section", "must be a list of 3 integers, got " + v.dump());
  int64_t sum = 0;
  for (size_t i = 0; i < 3; ++i) {
    if (!v[i].is_number_integer() || v[i].get<int64_t>() < 0)
      rr.bad("mrope_section", "must hold non-negative integers, got " + v.dump());
    s[i] = v[i].get<int64_t>();
    sum += s[i];
  }
  if (sum > rotary_dim / 2)
    rr.bad("mrope_section", "sums to " + std::to_string(sum) + ", more than rotary_dim / 2 = " +
                                std::to_string(rotary_dim / 2));
  if (rr.has("mrope_interleaved") && !rr.boolean("mrope_interleaved", true))
    rr.bad("mrope_interleaved", "false is not supported (Qwen3.5 interleaves the T/H/W frequencies)");
  return s;
}

}  // namespace

int64_t VisionConfig::position_side() const {
  auto side = int64_t(std::llround(std::sqrt(double(num_position_embeddings))));
  return side;
}

int64_t ModelConfig::num_full_layers() const {
  int64_t n = 0;
  for (auto k : layer_types) n += k == LayerKind::Full;
  return n;
}

ModelConfig parse_config(const json& top, const std::string& origin) {
  if (!top.is_object()) fail(origin, "not a JSON object");
  ModelConfig c;
  ConfigReader t(top, origin, "");
  c.model_type = t.string("model_type");
  if (t.has("architectures") && top["architectures"].is_array() && !top["architectures"].empty() &&
      top["architectures"][0].is_string())
    c.architecture = top["architectures"][0].get<std::string>();

  const json* text = &top;
  std::string prefix;
  const bool moe = c.model_type == "qwen3_5_moe" || c.model_type == "qwen3_5_moe_text";
  if (c.model_type == "qwen3_5" || c.model_type == "qwen3_5_moe") {
    if (!top.contains("text_config") || !top["text_config"].is_object())
      fail(origin, "model_type " + c.model_type + " needs a 'text_config' object");
    text = &top["text_config"];
    prefix = "text_config.";
  } else if (c.model_type != "qwen3_5_text" && c.model_type != "qwen3_5_moe_text") {
    fail(origin, "unsupported model_type '" + c.model_type +
                     "' (expected qwen3_5, qwen3_5_text, qwen3_5_moe or qwen3_5_moe_text)");
  }
  ConfigReader r(*text, origin, prefix);

  if (r.has("hidden_act") && r.string("hidden_act") != "silu")
    r.bad("hidden_act", "'" + r.string("hidden_act") + "' is not supported (expected silu)");
  if (!r.boolean("attn_output_gate", true)) r.bad("attn_output_gate", "false is not supported");
  if (r.boolean("attention_bias", false)) r.bad("attention_bias", "true is not supported");

  c.vocab_size = r.positive_int("vocab_size");
  c.hidden_size = r.positive_int("hidden_size");
  if (moe) read_moe(r, c);
  else c.intermediate_size = r.positive_int("intermediate_size");
  c.num_hidden_layers = r.positive_int("num_hidden_layers", kMaxConfigLayers);
  c.rms_norm_eps = r.has("rms_norm_eps") ? r.number("rms_norm_eps") : 1e-6;
  if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1)) r.bad("rms_norm_eps", "must be in (0, 1)");
  c.max_position_embeddings = r.positive_int("max_position_embeddings");

  c.num_attention_heads = r.positive_int("num_attention_heads");
  c.num_key_value_heads = r.positive_int("num_key_value_heads");
  c.head_dim = r.has("head_dim") ? r.positive_int("head_dim") : c.hidden_size / c.num_attention_heads;

  // rope_theta / partial_rotary_factor: rope_parameters (current HF), rope_scaling (older), or top level.
  const json* rope = nullptr;
  std::string rope_key;
  for (const char* k : {"rope_parameters", "rope_scaling"})
    if (r.has(k) && text->at(k).is_object()) { rope = &text->at(k); rope_key = std::string(k) + "."; break; }
  static const json kEmpty = json::object();
  ConfigReader rr(rope ? *rope : kEmpty, origin, prefix + rope_key);
  if (rope && rr.has("rope_type") && rr.string("rope_type") != "default")
    rr.bad("rope_type", "'" + rr.string("rope_type") + "' is not supported (expected default)");
  if (rope && rr.has("rope_theta")) c.rope_theta = rr.number("rope_theta");
  else if (r.has("rope_theta")) c.rope_theta = r.number("rope_theta");
  else fail(origin, "missing key '" + prefix + "rope_parameters.rope_theta'");
  if (r.has("partial_rotary_factor")) c.partial_rotary_factor = r.number("partial_rotary_factor");
  else if (rope && rr.has("partial_rotary_factor")) c.partial_rotary_factor = rr.number("partial_rotary_factor");
  else c.partial_rotary_factor = 0.25;  // HF's default for Qwen3.5
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
    r.bad("partial_rotary_factor", "must be in (0, 1]");
  if (c.rotary_dim() % 2 != 0 || c.rotary_dim() == 0)
    fail(origin, "rotary dimension head_dim * partial_rotary_factor = " + std::to_string(c.rotary_dim()) +
                     " must be a positive even number");
  if (rope) c.mrope_section = read_mrope_section(rr, c.rotary_dim());

  c.linear_num_key_heads = r.positive_int("linear_num_key_heads");
  c.linear_num_value_heads = r.positive_int("linear_num_value_heads");
  c.linear_key_head_dim = r.positive_int("linear_key_head_dim");
  c.linear_value_head_dim = r.positive_int("linear_value_head_dim");
  c.linear_conv_kernel_dim = r.positive_int("linear_conv_kernel_dim");
  if (c.linear_conv_kernel_dim < 2) r.bad("linear_conv_kernel_dim", "must be at least 2");

  check_divides(c.num_key_value_heads, c.num_attention_heads, "num_key_value_heads", "num_attention_heads", origin);
  check_divides(c.linear_num_key_heads, c.linear_num_value_heads, "linear_num_key_heads", "linear_num_value_heads",
                origin);

  c.layer_types = read_layer_types(r, c.num_hidden_layers, origin);
  for (const char* key : {"mtp_num_hidden_layers", "num_nextn_predict_layers"})
    if (r.has(key)) {
      const json& v = r.at(key);
      if (!v.is_number_integer() || v.get<int64_t>() < 0) r.bad(key, "must be a non-negative integer, got " + v.dump());
      if (v.get<int64_t>() > kMaxConfigLayers) r.bad(key, "is " + v.dump() + ", more than the supported " +
                                                             std::to_string(kMaxConfigLayers));
      c.mtp_num_hidden_layers = v.get<int64_t>();
      break;
    }

  // Top-level values win for the VL layout, as in HF's composite config.
  if (t.has("tie_word_embeddings")) c.tie_word_embeddings = t.boolean("tie_word_embeddings", false);
  else c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  const json& ids_src = text->contains("eos_token_id") ? *text : top;
  if (ids_src.contains("eos_token_id")) c.eos_token_ids = token_ids(ids_src["eos_token_id"], origin, "eos_token_id");
  for (auto id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size) fail(origin, "eos_token_id " + std::to_string(id) + " is outside the vocabulary");
  auto single = [&](const char* key) -> int64_t {
    const json& src = text->contains(key) ? *text : top;
    if (!src.contains(key)) return -1;
    auto ids = token_ids(src[key], origin, key);
    return ids.empty() ? -1 : ids[0];
  };
  c.bos_token_id = single("bos_token_id");
  c.pad_token_id = single("pad_token_id");

  if (top.contains("vision_config") && !top["vision_config"].is_null()) {
    if (!top["vision_config"].is_object()) t.bad("vision_config", "must be an object");
    c.vision = read_vision(ConfigReader(top["vision_config"], origin, "vision_config."), origin);
    if (c.vision->out_hidden_size != c.hidden_size)
      fail(origin, "'vision_config.out_hidden_size' (" + std::to_string(c.vision->out_hidden_size) +
                       ") differs from the text hidden_size (" + std::to_string(c.hidden_size) + ")");
    auto id = [&](const char* key) {
      const int64_t v = t.has(key) ? t.positive_int(key, c.vocab_size - 1) : -1;
      if (v < 0) t.bad(key, "is missing (a vision_config needs the placeholder token ids)");
      return v;
    };
    c.image_token_id = id("image_token_id");
    c.vision_start_token_id = id("vision_start_token_id");
    c.vision_end_token_id = id("vision_end_token_id");
    c.video_token_id = t.has("video_token_id") ? t.positive_int("video_token_id", c.vocab_size - 1) : -1;
  }
  return c;
}

ModelConfig load_config(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) fail(path.string(), "cannot open (missing file?)");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    fail(path.string(), std::string("not valid JSON: ") + e.what());
  }
  return parse_config(j, path.string());
}

json config_to_json(const ModelConfig& c, bool vl_layout) {
  json types = json::array();
  for (auto k : c.layer_types) types.push_back(k == LayerKind::Full ? "full_attention" : "linear_attention");
  // Frequency pairs split over the T/H/W position streams as in the real configs (32 -> 11,11,10).
  int64_t pairs = c.rotary_dim() / 2;
  json mrope_section = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3};
  if (c.mrope_section[0] + c.mrope_section[1] + c.mrope_section[2] > 0)
    mrope_section = {c.mrope_section[0], c.mrope_section[1], c.mrope_section[2]};
  json text = {
      {"model_type", c.is_moe() ? "qwen3_5_moe_text" : "qwen3_5_text"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"attn_output_gate", true},
      {"rms_norm_eps", c.rms_norm_eps},
      {"max_position_embeddings", c.max_position_embeddings},
      {"linear_num_key_heads", c.linear_num_key_heads},
      {"linear_num_value_heads", c.linear_num_value_heads},
      {"linear_key_head_dim", c.linear_key_head_dim},
      {"linear_value_head_dim", c.linear_value_head_dim},
      {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
      {"full_attention_interval", 4},
      {"layer_types", types},
      {"mamba_ssm_dtype", "float32"},
      {"partial_rotary_factor", c.partial_rotary_factor},
      {"rope_parameters",
       {{"rope_type", "default"},
        {"rope_theta", c.rope_theta},
        {"partial_rotary_factor", c.partial_rotary_factor},
        {"mrope_interleaved", true},
        {"mrope_section", mrope_section}}},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"use_cache", true},
      {"mtp_num_hidden_layers", c.mtp_num_hidden_layers},
      {"mtp_use_dedicated_embeddings", false},
  };
  if (c.is_moe()) {
    text["num_experts"] = c.num_experts;
    text["num_experts_per_tok"] = c.num_experts_per_tok;
    text["moe_intermediate_size"] = c.moe_intermediate_size;
    text["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
    text["norm_topk_prob"] = true;
    text["router_aux_loss_coef"] = 0.001;
    text["output_router_logits"] = false;
  } else {
    text["intermediate_size"] = c.intermediate_size;
  }
  if (c.eos_token_ids.size() == 1) text["eos_token_id"] = c.eos_token_ids[0];
  else if (!c.eos_token_ids.empty()) text["eos_token_id"] = c.eos_token_ids;
  text["bos_token_id"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  text["pad_token_id"] = c.pad_token_id >= 0 ? json(c.pad_token_id) : json(nullptr);
  if (!vl_layout) {
    text["architectures"] = {c.is_moe() ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"};
    return text;
  }
  json top = {{"architectures", {c.is_moe() ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"}},
              {"model_type", c.is_moe() ? "qwen3_5_moe" : "qwen3_5"},
              {"tie_word_embeddings", c.tie_word_embeddings},
              {"text_config", text}};
  if (c.vision) {
    const VisionConfig& v = *c.vision;
    top["vision_config"] = {{"model_type", "qwen3_5"},
                            {"depth", v.depth},
                            {"hidden_size", v.hidden_size},
                            {"num_heads", v.num_heads},
                            {"intermediate_size", v.intermediate_size},
                            {"hidden_act", "gelu_pytorch_tanh"},
                            {"in_channels", v.in_channels},
                            {"patch_size", v.patch_size},
                            {"temporal_patch_size", v.temporal_patch_size},
                            {"spatial_merge_size", v.spatial_merge_size},
                            {"out_hidden_size", v.out_hidden_size},
                            {"num_position_embeddings", v.num_position_embeddings},
                            {"deepstack_visual_indexes", json::array()},
                            {"initializer_range", 0.02}};
    top["image_token_id"] = c.image_token_id;
    top["video_token_id"] = c.video_token_id >= 0 ? json(c.video_token_id) : json(nullptr);
    top["vision_start_token_id"] = c.vision_start_token_id;
    top["vision_end_token_id"] = c.vision_end_token_id;
  }
  return top;
}

}  // namespace deltagen
