#include "chat/chat_template.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "deltagen/error.h"
#include "tokenizer/tokenizer.h"

namespace deltagen {
namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

// The fallback for a folder without a template: ChatML with Qwen's tokens and
// Qwen3.5's generation prompt (thinking on unless enable_thinking is false).
// deltagen's own text; no tools, no reasoning handling.
constexpr std::string_view kBuiltinSource =
    "{%- if tools %}{{ raise_exception('the built-in chat format has no tools: "
    "add the checkpoint\\'s chat_template.jinja to the model folder') }}{% endif -%}\n"
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content if message.content is string else '') + "
    "'<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}\n"
    "{%- else -%}{{- '<think>\\n' -}}{%- endif -%}\n"
    "{%- endif -%}\n";

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file.string(), "cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return std::move(s).str();
}

ordered_json read_json(const fs::path& file) {
  try {
    return ordered_json::parse(read_text(file));
  } catch (const ordered_json::exception& e) {
    fail(file.string(), std::string("invalid JSON: ") + e.what());
  }
}

// bos_token, eos_token, pad_token, unk_token as strings (tokenizer_config.json
// writes each as a string or as {"content": ...}).
ordered_json special_tokens_of(const ordered_json& config) {
  ordered_json tokens = ordered_json::object();
  for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string()) tokens[key] = *it;
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) tokens[key] = (*it)["content"];
  }
  return tokens;
}

// tokenizer_config.json's "chat_template": a string, or named templates.
struct NamedTemplates {
  std::string main, tool_use;
};

NamedTemplates templates_of(const ordered_json& value, const std::string& origin) {
  if (value.is_string()) return {value.get<std::string>(), {}};
  if (!value.is_array()) fail(origin, "'chat_template' is neither a string nor a list of named templates");
  NamedTemplates t;
  for (const ordered_json& entry : value) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["name"].is_string() ||
        !entry["template"].is_string())
      fail(origin, "'chat_template' lists an entry without a string 'name' and 'template'");
    const std::string name = entry["name"].get<std::string>();
    if (name == "default") t.main = entry["template"].get<std::string>();
    else if (name == "tool_use") t.tool_use = entry["template"].get<std::string>();
  }
  if (t.main.empty()) fail(origin, "'chat_template' has no template named \"default\"");
  return t;
}

}  // namespace

ChatTemplate ChatTemplate::from_source(std::string_view source, std::string name, ordered_json special_tokens) {
  ChatTemplate t;
  t.name_ = std::move(name);
  t.source_ = std::string(source);
  t.main_ = std::make_shared<const jinja::Template>(jinja::Template::parse(source, t.name_));
  t.special_tokens_ = std::move(special_tokens);
  return t;
}

ChatTemplate ChatTemplate::builtin() {
  static const ChatTemplate t = [] {
    ChatTemplate b = from_source(kBuiltinSource, "built-in");
    b.builtin_ = true;
    return b;
  }();
  return t;
}

std::optional<ChatTemplate> ChatTemplate::find(const fs::path& dir) {
  ordered_json special = ordered_json::object();
  ordered_json config;
  const fs::path config_file = dir / "tokenizer_config.json";
  if (fs::is_regular_file(config_file)) {
    config = read_json(config_file);
    if (!config.is_object()) fail(config_file.string(), "is not a JSON object");
    special = special_tokens_of(config);
  }
  if (const fs::path f = dir / "chat_template.jinja"; fs::is_regular_file(f))
    return from_source(read_text(f), f.string(), special);
  if (const fs::path f = dir / "chat_template.json"; fs::is_regular_file(f)) {
    const ordered_json j = read_json(f);
    if (!j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string())
      fail(f.string(), "has no string 'chat_template'");
    return from_source(j["chat_template"].get<std::string>(), f.string(), special);
  }
  if (config.is_object() && config.contains("chat_template") && !config["chat_template"].is_null()) {
    const NamedTemplates named = templates_of(config["chat_template"], config_file.string());
    ChatTemplate t = from_source(named.main, config_file.string(), special);
    if (!named.tool_use.empty())
      t.tool_use_ = std::make_shared<const jinja::Template>(
          jinja::Template::parse(named.tool_use, config_file.string() + " (tool_use)"));
    return t;
  }
  return std::nullopt;
}

ChatTemplate ChatTemplate::for_model(const fs::path& dir) {
  if (std::optional<ChatTemplate> t = find(dir)) return std::move(*t);
  std::fprintf(stderr,
               "warning: %s has no chat template (chat_template.jinja or tokenizer_config.json's chat_template); "
               "using deltagen's built-in ChatML format\n",
               dir.string().c_str());
  return builtin();
}

std::string ChatTemplate::render(const ChatRenderInputs& in) const {
  ordered_json context = special_tokens_;
  context["messages"] = in.messages;
  const bool has_tools = in.tools.is_array() && !in.tools.empty();
  if (has_tools) context["tools"] = in.tools;
  context["add_generation_prompt"] = in.add_generation_prompt;
  if (!in.kwargs.is_null()) {
    if (!in.kwargs.is_object()) fail("chat_template_kwargs", "must be an object");
    for (const auto& [key, value] : in.kwargs.items()) context[key] = value;
  }
  const jinja::Template& t = has_tools && tool_use_ ? *tool_use_ : *main_;
  return t.render(context);
}

std::vector<int64_t> reply_end_ids(const Tokenizer& tokenizer) {
  std::vector<int64_t> ids;
  auto add = [&ids](std::optional<int64_t> id) {
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  };
  add(tokenizer.token_to_id("<|im_end|>"));
  add(tokenizer.token_to_id("<|endoftext|>"));
  add(tokenizer.eos_token_id());
  return ids;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  // The last <think> after the last <|im_start|> is still open.
  const size_t turn = prompt.rfind("<|im_start|>");
  const std::string_view tail = turn == std::string_view::npos ? prompt : prompt.substr(turn);
  const size_t open = tail.rfind("<think>");
  return open != std::string_view::npos && tail.find("</think>", open) == std::string_view::npos;
}

}  // namespace deltagen
