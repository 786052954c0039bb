// Fixtures of the runtime tests: the golden model built once per test
// process, a tiny byte-level BPE tokenizer that fits its 512-token
// vocabulary (Qwen's special tokens at the top, <|im_end|> = 511 = the
// golden EOS), and running the CLI with text on stdin.
#pragma once
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "deltagen/deltagen.h"
#include "models/build.h"
#include "runtime/session.h"
#include "test_util.h"
#include "util/npy.h"

namespace deltagen::test {

constexpr int64_t kGoldenVocab = 512;
constexpr int64_t kImStartId = 510, kImEndId = 511, kEndOfTextId = 509, kThinkId = 505, kEndThinkId = 506;

// The golden checkpoint built as an fp32 model, once per test process.
inline const fs::path& golden_model_dir() {
  static TempDir dir;
  static const fs::path model = [] {
    fs::path out = dir / "tiny-a-fp32";
    auto ckpt = Checkpoint::open(golden_checkpoint());
    build_model(*ckpt, BuildOptions{}, out);
    return out;
  }();
  return model;
}

// A request for the speculation tests: `new_tokens` without EOS stops, every
// row's logits kept, and k guesses per round with `method`.
inline GenerationOptions speculative_options(int64_t new_tokens, SpeculativeMethod method = SpeculativeMethod::None,
                                             int64_t k = 3) {
  GenerationOptions o;
  o.max_new_tokens = new_tokens;
  o.stop_at_eos = false;
  o.collect_logits = true;
  o.speculative.method = method;
  o.speculative.draft_tokens = k;
  return o;
}

inline Model& golden_runtime_model() {
  static std::unique_ptr<Model> model = Model::load(golden_model_dir(), RuntimeOptions{.intra_op_threads = 1});
  return *model;
}

inline std::vector<int64_t> golden_prompt_ids() {
  auto summary = nlohmann::json::parse(read_text(golden_file("summary.json")));
  return summary.at("prompt_ids").get<std::vector<int64_t>>();
}

inline std::vector<int64_t> golden_greedy_ids() { return read_npy(golden_file("greedy_tokens.npy")).as_i64(); }

// GPT-2's byte-level alphabet: the character that stands for byte b.
inline std::string byte_level_char(int b) {
  auto printable = [](int x) { return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255); };
  int code = b;
  if (!printable(b)) {
    code = 256;
    for (int x = 0; x < b; ++x) code += printable(x) ? 0 : 1;
  }
  std::string s;
  if (code < 0x80) {
    s += char(code);
  } else {
    s += char(0xC0 | (code >> 6));
    s += char(0x80 | (code & 0x3F));
  }
  return s;
}

// Ids 0-255: the bytes; 256 "he", 257 "ll" (two merges); 258-508 filler
// tokens "w258" ... (decodable, never produced by encoding); 505 <think>,
// 506 </think>, 509 <|endoftext|>, 510 <|im_start|>, 511 <|im_end|>.
inline std::string tiny_tokenizer_json() {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_char(b)] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  for (int id = 258; id < kGoldenVocab; ++id)
    if (id != kThinkId && id != kEndThinkId && id < kEndOfTextId) vocab["w" + std::to_string(id)] = id;
  auto added = [](int64_t id, const std::string& content, bool special) {
    return json{{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false},   {"normalized", false}, {"special", special}};
  };
  const std::string qwen_split =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array({added(kThinkId, "<think>", false), added(kEndThinkId, "</think>", false),
                                    added(kEndOfTextId, "<|endoftext|>", true), added(kImStartId, "<|im_start|>", true),
                                    added(kImEndId, "<|im_end|>", true)})},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"},
                       {"pattern", {{"Regex", qwen_split}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", json::array({"h e", "l l"})}}},
  };
  return tokenizer.dump();
}

inline std::string tiny_tokenizer_config_json() {
  return R"({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": null})";
}

// A copy of `model_dir` with the given tokenizer files.
inline void copy_model_with_tokenizer(const fs::path& model_dir, const fs::path& out, const std::string& tokenizer_json,
                                      const std::string& tokenizer_config_json) {
  fs::create_directories(out);
  for (const auto& entry : fs::directory_iterator(model_dir)) fs::copy_file(entry.path(), out / entry.path().filename());
  std::ofstream(out / "tokenizer.json") << tokenizer_json;
  std::ofstream(out / "tokenizer_config.json") << tokenizer_config_json;
}

// The golden model with the tiny tokenizer, once per test process.
inline const fs::path& golden_chat_model_dir() {
  static TempDir dir;
  static const fs::path model = [] {
    fs::path out = dir / "tiny-a-chat";
    copy_model_with_tokenizer(golden_model_dir(), out, tiny_tokenizer_json(), tiny_tokenizer_config_json());
    return out;
  }();
  return model;
}

inline std::shared_ptr<Engine> golden_chat_engine() {
  static std::shared_ptr<Engine> engine = Engine::load(golden_chat_model_dir(), EngineOptions{.threads = 1});
  return engine;
}

// Runs the CLI with `input` on stdin.
inline CliResult run_cli_with_input(const std::vector<std::string>& args, const std::string& input) {
  static int counter = 0;
  const fs::path base =
      fs::temp_directory_path() / ("deltagen-cli-in-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::ofstream(base.string() + ".in", std::ios::binary) << input;
  std::string cmd = shell_quote(DELTAGEN_CLI);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " <" + shell_quote(base.string() + ".in") + " >" + shell_quote(base.string() + ".out") + " 2>" +
         shell_quote(base.string() + ".err");
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(base.string() + ".out");
  r.err = read_text(base.string() + ".err");
  for (const char* ext : {".in", ".out", ".err"}) fs::remove(base.string() + ext);
  return r;
}

inline std::string joined_ids(const std::vector<int64_t>& ids, char separator) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? std::string(1, separator) : "") + std::to_string(ids[i]);
  return s;
}

}  // namespace deltagen::test
