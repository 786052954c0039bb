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

}  // namespace

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
  if (auto d = model.find("decoder"); d != model.end() && d->is_object()) {
    if (auto f = d->find("filename"); f != d->end()) {
      if (!f->is_string() || f->get<std::string>().empty()) fail(origin, "'decoder.filename' is not a file name");
      // The model must come from the model folder: a downloaded config must
      // not point the runtime at any other file on the machine.
      const std::filesystem::path name(f->get<std::string>());
      bool inside = name.is_relative();
      for (const auto& part : name) inside = inside && part != "..";
      if (!inside) fail(origin, "'decoder.filename' " + name.string() + " leads outside the model folder");
      cfg.model_filename = f->get<std::string>();
    }
  }
  return cfg;
}

}  // namespace deltagen
