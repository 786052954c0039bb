#include "checkpoint/generation_config.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "deltagen/error.h"

namespace deltagen {
using nlohmann::json;

namespace {

std::optional<double> number(const json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) fail(origin, std::string("'") + key + "' is not a number");
  return it->get<double>();
}

}  // namespace

std::optional<GenerationDefaults> read_generation_config(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "generation_config.json";
  if (!std::filesystem::is_regular_file(file)) return std::nullopt;
  const std::string origin = file.string();
  std::ifstream in(file);
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    fail(origin, std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(origin, "is not a JSON object");
  GenerationDefaults g;
  if (auto it = j.find("do_sample"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) fail(origin, "'do_sample' is not a boolean");
    g.do_sample = it->get<bool>();
  }
  g.temperature = number(j, "temperature", origin);
  g.top_p = number(j, "top_p", origin);
  g.min_p = number(j, "min_p", origin);
  g.repetition_penalty = number(j, "repetition_penalty", origin);
  g.presence_penalty = number(j, "presence_penalty", origin);
  if (auto it = j.find("top_k"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) fail(origin, "'top_k' is not an integer");
    g.top_k = it->get<int64_t>();
  }
  if ((g.temperature && *g.temperature < 0) || (g.top_p && !(*g.top_p > 0 && *g.top_p <= 1)) ||
      (g.min_p && !(*g.min_p >= 0 && *g.min_p <= 1)) || (g.repetition_penalty && !(*g.repetition_penalty > 0)) ||
      (g.top_k && *g.top_k < 0))
    fail(origin, "a sampling value is out of range");
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    if (it->is_number_integer()) g.eos_token_ids = {it->get<int64_t>()};
    else if (it->is_array()) {
      for (const json& id : *it) {
        if (!id.is_number_integer()) fail(origin, "'eos_token_id' holds a non-integer");
        g.eos_token_ids.push_back(id.get<int64_t>());
      }
    } else {
      fail(origin, "'eos_token_id' is neither an integer nor a list");
    }
  }
  return g;
}

}  // namespace deltagen
