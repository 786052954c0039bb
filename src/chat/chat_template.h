// A model's chat template: the Jinja text its checkpoint ships (so a
// conversation is rendered exactly as the model was trained, fine-tunes
// included), rendered by deltagen's own engine (chat/jinja).
//
// Where it comes from, in the order transformers looks: chat_template.jinja,
// then chat_template.json ({"chat_template": ...}), then tokenizer_config.json's
// "chat_template" (a string, or a list of {name, template}: "tool_use" when
// tools are given and it exists, else "default"). A folder with none of them
// gets a built-in ChatML format in Qwen's style (with a warning): better than
// refusing, but not what a fine-tune may expect.
//
// The template sees what transformers passes it: messages, tools (when
// given), add_generation_prompt, the tokenizer's special tokens (bos_token,
// eos_token, pad_token, unk_token as strings) and any keyword arguments
// (enable_thinking, ...), which may override those.
#pragma once
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/jinja/jinja.h"

namespace deltagen {

class Tokenizer;

struct ChatRenderInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // see chat/messages.h
  nlohmann::ordered_json tools;                                       // null, or a list of tool definitions
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();   // enable_thinking, ...
  bool add_generation_prompt = true;
};

class ChatTemplate {
 public:
  // The model folder's (or checkpoint's) template, nullopt when it has none.
  // Throws Error naming the file when one is there but does not parse.
  static std::optional<ChatTemplate> find(const std::filesystem::path& dir);
  // find(), else the built-in format with a one-line warning on stderr.
  static ChatTemplate for_model(const std::filesystem::path& dir);
  static ChatTemplate from_source(std::string_view source, std::string name,
                                  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object());
  static ChatTemplate builtin();

  // Throws Error (one line) for a template error or its raise_exception().
  std::string render(const ChatRenderInputs& inputs) const;

  const std::string& name() const { return name_; }  // the file it came from, or "built-in"
  bool is_builtin() const { return builtin_; }
  // The text, as found (for `build` to write chat_template.jinja).
  const std::string& source() const { return source_; }

 private:
  ChatTemplate() = default;

  std::string name_;
  std::string source_;
  std::shared_ptr<const jinja::Template> main_;
  std::shared_ptr<const jinja::Template> tool_use_;  // a separate "tool_use" template, when the file has one
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();
  bool builtin_ = false;
};

// The ids that end an assistant reply, those the tokenizer has: <|im_end|>,
// <|endoftext|>, its eos_token (templates end turns with one of them).
std::vector<int64_t> reply_end_ids(const Tokenizer& tokenizer);

// Where generation starts after a prompt rendered with the generation
// prompt: true when the prompt opened a <think> block that the reply
// continues (Qwen3.5 with thinking on), so the reply begins inside it.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace deltagen
