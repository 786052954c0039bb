#include "runtime/genai_config.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "deltagen/error.h"

namespace deltagen {
namespace {

using nlohmann::json;

int64_t optional_int(const json& parent, const char* key, const std::string& origin) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return 0;
  if (!it->is_number_integer()) fail(origin, std::string("'") + key + "' is not an integer");
  return it->get<int64_t>();
}

std::vector<int64_t> eos_ids(const json& model, const std::string& origin) {
  auto it = model.find("eos_token_id");
  if (it == model.end() || it->is_null()) return {};
  if (it->is_number_integer()) return {it->get<int64_t>()};
  if (!it->is_array()) fail(origin, "'eos_token_id' is neither an integer nor a list");
  std::vector<int64_t> ids;
  for (const auto& v : *it) {
    if (!v.is_number_integer()) fail(origin, "'eos_token_id' holds a non-integer");
    ids.push_back(v.get<int64_t>());
  }
  return ids;
}

double optional_number(const json& parent, const char* key, double fallback, const std::string& origin) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return fallback;
  if (!it->is_number()) fail(origin, std::string("'search.") + key + "' is not a number");
  return it->get<double>();
}

// The "search" section as sampling settings; out-of-range values are the
// file's error, reported as such.
SamplingOptions search_sampling(const json& search, const std::string& origin) {
  SamplingOptions s;
  if (!search.is_object()) fail(origin, "'search' is not an object");
  auto sample = search.find("do_sample");
  if (sample != search.end() && !sample->is_null() && !sample->is_boolean())
    fail(origin, "'search.do_sample' is not a boolean");
  const bool do_sample = sample != search.end() && sample->is_boolean() && sample->get<bool>();
  s.repetition_penalty = optional_number(search, "repetition_penalty", 1.0, origin);
  if (!(s.repetition_penalty > 0)) fail(origin, "'search.repetition_penalty' must be positive");
  if (!do_sample) return s;  // greedy
  s.temperature = optional_number(search, "temperature", 1.0, origin);
  s.top_k = optional_int(search, "top_k", origin);
  s.top_p = optional_number(search, "top_p", 1.0, origin);
  s.min_p = optional_number(search, "min_p", 0.0, origin);
  s.presence_penalty = optional_number(search, "presence_penalty", 0.0, origin);
  if (!(s.temperature >= 0) || s.top_k < 0 || !(s.top_p > 0 && s.top_p <= 1) || !(s.min_p >= 0 && s.min_p <= 1))
    fail(origin, "'search' has a sampling setting out of range");
  return s;
}

}  // namespace

// onnxruntime-genai's form: "provider_options": [{"webgpu": {...}}, ...], in
// order of preference; the first one deltagen knows is the model's provider.
static std::optional<ExecutionProvider> first_provider(const nlohmann::json& decoder, const std::string& origin) {
  auto so = decoder.find("session_options");
  if (so == decoder.end() || !so->is_object()) return std::nullopt;
  auto list = so->find("provider_options");
  if (list == so->end()) return std::nullopt;
  if (!list->is_array()) fail(origin, "'decoder.session_options.provider_options' is not a list");
  for (const auto& entry : *list) {
    if (!entry.is_object() || entry.size() != 1)
      fail(origin, "'decoder.session_options.provider_options' entries must be {\"name\": {options}}");
    const std::string name = entry.begin().key();
    if (name == "cpu" || name == "webgpu" || name == "cuda") return parse_execution_provider(name);
  }
  return std::nullopt;
}

GenaiConfig load_genai_config(const std::filesystem::path& path) {
  const std::string origin = path.string();
  std::ifstream in(path);
  if (!in) fail(origin, "cannot open (is this a model folder written by 'deltagen build'?)");
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    fail(origin, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    fail(origin, "no 'model' object");
  const json& model = j["model"];

  GenaiConfig cfg;
  cfg.context_length = optional_int(model, "context_length", origin);
  cfg.vocab_size = optional_int(model, "vocab_size", origin);
  cfg.eos_token_ids = eos_ids(model, origin);
  // A model file must come from the model folder: a downloaded config must
  // not point the runtime at any other file on the machine.
  auto file_in_folder = [&](const json& section, const std::string& key) -> std::string {
    auto f = section.find("filename");
    if (f == section.end()) return "";
    if (!f->is_string() || f->get<std::string>().empty()) fail(origin, "'" + key + ".filename' is not a file name");
    const std::filesystem::path name(f->get<std::string>());
    bool inside = name.is_relative();
    for (const auto& part : name) inside = inside && part != "..";
    if (!inside) fail(origin, "'" + key + ".filename' " + name.string() + " leads outside the model folder");
    return f->get<std::string>();
  };
  if (auto d = model.find("decoder"); d != model.end() && d->is_object()) {
    if (std::string f = file_in_folder(*d, "decoder"); !f.empty()) cfg.model_filename = f;
    cfg.provider = first_provider(*d, origin);
  }
  auto v = model.find("vision");
  auto e = model.find("embedding");
  if (v != model.end() || e != model.end()) {
    if (v == model.end() || !v->is_object() || e == model.end() || !e->is_object())
      fail(origin, "a vision model needs both 'model.vision' and 'model.embedding' objects");
    cfg.vision_filename = file_in_folder(*v, "vision");
    cfg.embedding_filename = file_in_folder(*e, "embedding");
    if (cfg.vision_filename.empty() || cfg.embedding_filename.empty())
      fail(origin, "'model.vision' and 'model.embedding' need a filename");
    cfg.image_token_id = optional_int(model, "image_token_id", origin);
    cfg.vision_start_token_id = optional_int(model, "vision_start_token_id", origin);
    cfg.vision_end_token_id = optional_int(model, "vision_end_token_id", origin);
    if (cfg.image_token_id <= 0) fail(origin, "a vision model needs 'model.image_token_id'");
    if (int64_t m = optional_int(*v, "spatial_merge_size", origin); m > 0) cfg.spatial_merge_size = m;
  }
  if (auto m = model.find("mtp"); m != model.end()) {
    if (!m->is_object()) fail(origin, "'model.mtp' is not an object");
    cfg.mtp_filename = file_in_folder(*m, "mtp");
    if (cfg.mtp_filename.empty()) fail(origin, "'model.mtp' needs a filename");
  }
  if (auto search = j.find("search"); search != j.end()) cfg.sampling = search_sampling(*search, origin);
  return cfg;
}

}  // namespace deltagen
