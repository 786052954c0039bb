// Ways to break a checkpoint, each the kind of damage a real download can
// have. Used by the library tests and the CLI bad-input tests.
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

namespace deltagen::test {

inline nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read_text(p)); }
inline void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// Copies the golden checkpoint (config.json + model.safetensors) into dir.
inline void copy_golden(const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(golden_checkpoint() / "config.json", dir / "config.json");
  fs::copy_file(golden_checkpoint() / "model.safetensors", dir / "model.safetensors");
  fs::permissions(dir / "config.json", fs::perms::owner_write, fs::perm_options::add);
  fs::permissions(dir / "model.safetensors", fs::perms::owner_write, fs::perm_options::add);
}

// Rewrites the safetensors header of `file` through `edit`, keeping the data.
inline void edit_header(const fs::path& file, const std::function<void(nlohmann::json&)>& edit) {
  std::string bytes = read_text(file);
  uint64_t len;
  std::memcpy(&len, bytes.data(), 8);
  auto header = nlohmann::json::parse(bytes.substr(8, len));
  edit(header);
  std::string h = header.dump();
  uint64_t new_len = h.size();
  std::string out(reinterpret_cast<const char*>(&new_len), 8);
  write_text(file, out + h + bytes.substr(8 + len));
}

struct Breakage {
  std::string name;
  std::function<void(const fs::path& dir)> apply;
  std::string expect_file;     // the file the error must name
  std::string expect_problem;  // a phrase the error must contain
};

inline std::vector<Breakage> checkpoint_breakages() {
  return {
      {"missing_config", [](const fs::path& d) { fs::remove(d / "config.json"); }, "config.json", "cannot open"},
      {"config_not_json", [](const fs::path& d) { write_text(d / "config.json", "{\"model_type\": "); },
       "config.json", "not valid JSON"},
      {"config_bad_utf8",
       [](const fs::path& d) {
         std::string c = read_text(d / "config.json");
         c.insert(c.find("qwen3_5"), "\xc3\x28");  // an invalid two-byte sequence inside a string
         write_text(d / "config.json", c);
       },
       "config.json", "not valid JSON"},
      {"unknown_model_type",
       [](const fs::path& d) {
         auto j = read_json(d / "config.json");
         j["model_type"] = "llama";
         write_text(d / "config.json", j.dump());
       },
       "config.json", "unsupported model_type 'llama'"},
      {"missing_key",
       [](const fs::path& d) {
         auto j = read_json(d / "config.json");
         j["text_config"].erase("hidden_size");
         write_text(d / "config.json", j.dump());
       },
       "config.json", "missing key 'text_config.hidden_size'"},
      {"unknown_layer_type",
       [](const fs::path& d) {
         auto j = read_json(d / "config.json");
         j["text_config"]["layer_types"][1] = "sliding_attention";
         write_text(d / "config.json", j.dump());
       },
       "config.json", "unknown layer type 'sliding_attention'"},
      {"unknown_activation",
       [](const fs::path& d) {
         auto j = read_json(d / "config.json");
         j["text_config"]["hidden_act"] = "gelu";
         write_text(d / "config.json", j.dump());
       },
       "config.json", "'gelu' is not supported"},
      {"missing_weights", [](const fs::path& d) { fs::remove(d / "model.safetensors"); }, "",
       "no model.safetensors"},
      {"truncated_safetensors",
       [](const fs::path& d) { fs::resize_file(d / "model.safetensors", fs::file_size(d / "model.safetensors") - 1000); },
       "model.safetensors", "truncated"},
      {"tiny_safetensors", [](const fs::path& d) { write_text(d / "model.safetensors", "abc"); }, "model.safetensors",
       "truncated"},
      {"absurd_header_length",
       [](const fs::path& d) {
         std::string b = read_text(d / "model.safetensors");
         uint64_t huge = uint64_t(1) << 40;
         std::memcpy(b.data(), &huge, 8);
         write_text(d / "model.safetensors", b);
       },
       "model.safetensors", "header length"},
      {"wrong_dtype",
       [](const fs::path& d) {
         edit_header(d / "model.safetensors",
                     [](auto& h) { h["model.language_model.norm.weight"]["dtype"] = "I64"; });
       },
       "model.safetensors", "unsupported dtype \"I64\""},
      {"shape_mismatch",
       [](const fs::path& d) {
         edit_header(d / "model.safetensors", [](auto& h) {
           auto& t = h["model.language_model.layers.0.linear_attn.in_proj_z.weight"];
           t["shape"] = {32, 128};  // same byte count, wrong shape
         });
       },
       "model.safetensors", "has shape [32,128] but config.json implies [64,64]"},
      {"offsets_past_end",
       [](const fs::path& d) {
         edit_header(d / "model.safetensors", [](auto& h) {
           h["model.language_model.norm.weight"]["data_offsets"] = {uint64_t(1) << 40, (uint64_t(1) << 40) + 256};
         });
       },
       "model.safetensors", "outside the file"},
      {"missing_tensor",
       [](const fs::path& d) {
         edit_header(d / "model.safetensors", [](auto& h) { h.erase("model.language_model.layers.2.mlp.up_proj.weight"); });
       },
       "", "layers.2.mlp.up_proj.weight is missing"},
  };
}

}  // namespace deltagen::test
