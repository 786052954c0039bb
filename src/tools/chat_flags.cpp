#include "tools/chat_flags.h"

#include <fstream>
#include <iterator>

#include "chat/messages.h"
#include "deltagen/error.h"

namespace deltagen {
using nlohmann::ordered_json;

namespace {

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open the ") + what + " file");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

ordered_json parse_json(const std::string& text, const std::string& origin) {
  try {
    return ordered_json::parse(text);
  } catch (const ordered_json::exception& e) {
    fail(origin, "is not valid JSON (" + std::string(e.what()) + ")");
  }
}

// Errors of the message checks name the field; say which file it is in.
template <class Fn>
auto in_file(const std::string& file, Fn fn) {
  try {
    return fn();
  } catch (const Error& e) {
    fail(file, e.what());
  }
}

}  // namespace

ChatFlags parse_chat_flags(Args& args, bool with_messages) {
  ChatFlags f;
  f.system_prompt = args.get_or("system", "");
  f.thinking = !args.flag("no-think");
  if (auto tools = args.get("tools")) {
    f.tools_json = read_file(*tools, "tools");
    const ordered_json t = parse_json(f.tools_json, *tools);
    in_file(*tools, [&] { return checked_tools(t); });
  }
  if (auto kwargs = args.get("chat-kwargs")) {
    if (!parse_json(*kwargs, "--chat-kwargs").is_object()) fail("--chat-kwargs", "must be a JSON object");
    f.kwargs_json = *kwargs;
  }
  if (with_messages) {
    if (auto file = args.get("messages")) {
      const ordered_json m = parse_json(read_file(*file, "messages"), *file);
      f.messages = in_file(*file, [&] { return normalize_messages(m); });
    }
  }
  return f;
}

ChatRenderInputs chat_inputs(const ChatFlags& flags, const std::string& user_text, int64_t images) {
  ChatRenderInputs in;
  in.messages = flags.messages ? *flags.messages : normalize_messages(ordered_json::array({{{"role", "user"}, {"content", user_text}}}));
  if (images > 0 && !flags.messages) {
    // Image parts first, then the text, as an OpenAI message with images;
    // the template writes <|vision_start|><|image_pad|><|vision_end|> for each.
    ordered_json content = ordered_json::array();
    for (int64_t i = 0; i < images; ++i) content.push_back({{"type", "image"}});
    content.push_back({{"type", "text"}, {"text", user_text}});
    in.messages[0]["content"] = content;
  }
  if (!flags.system_prompt.empty() && (in.messages.empty() || in.messages[0]["role"] != "system"))
    in.messages.insert(in.messages.begin(), ordered_json{{"role", "system"}, {"content", flags.system_prompt}});
  if (!flags.tools_json.empty()) in.tools = ordered_json::parse(flags.tools_json);
  if (!flags.kwargs_json.empty()) in.kwargs = ordered_json::parse(flags.kwargs_json);
  // Left undefined unless --no-think: what Hugging Face's apply_chat_template does by default.
  if (!flags.thinking && !in.kwargs.contains("enable_thinking")) in.kwargs["enable_thinking"] = false;
  if (in.kwargs.contains("add_generation_prompt")) {
    if (!in.kwargs["add_generation_prompt"].is_boolean()) fail("--chat-kwargs", "add_generation_prompt must be a boolean");
    in.add_generation_prompt = in.kwargs["add_generation_prompt"].get<bool>();
  }
  return in;
}

}  // namespace deltagen
