#include "chat/messages.h"

#include <string>

#include "deltagen/error.h"

namespace deltagen {
using nlohmann::ordered_json;

namespace {

constexpr size_t kMaxMessages = 100000;

std::string at(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// An image part's source (MessageImage::source) and the field it came from.
MessageImage image_source(const ordered_json& part, const std::string& where) {
  const std::string type = part["type"].get<std::string>();
  if (type == "image_url") {
    if (!part.contains("image_url")) fail(where + ".image_url", "is missing");
    const ordered_json& u = part["image_url"];
    if (u.is_string()) return {u.get<std::string>(), where + ".image_url"};
    if (!u.is_object() || !u.contains("url") || !u["url"].is_string())
      fail(where + ".image_url.url", "must be a string");
    return {u["url"].get<std::string>(), where + ".image_url.url"};
  }
  for (const char* key : {"image", "url", "path"}) {
    if (!part.contains(key) || part[key].is_null()) continue;
    if (!part[key].is_string()) fail(where + "." + key, "must be a string");
    return {part[key].get<std::string>(), where + "." + key};
  }
  return {"", where};
}

// A string, null, or text parts joined; with image parts (when `images` takes
// them) the parts in order, images as {"type": "image"}.
ordered_json normalized_content(const ordered_json& content, const std::string& path, const std::string& role,
                                std::vector<MessageImage>* images) {
  if (content.is_string() || content.is_null()) return content;
  if (!content.is_array()) fail(path, "must be a string, null or a list of content parts");
  std::string text;
  ordered_json parts = ordered_json::array();
  std::vector<MessageImage> found;
  for (size_t i = 0; i < content.size(); ++i) {
    const ordered_json& part = content[i];
    const std::string where = at(path, i);
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      fail(where, "must be an object with a string 'type'");
    const std::string type = part["type"].get<std::string>();
    if (images && (type == "image_url" || type == "image")) {
      if (role == "system") fail(where, "system messages cannot hold images");
      found.push_back(image_source(part, where));
      parts.push_back({{"type", "image"}});
      continue;
    }
    if (type != "text") fail(where + ".type", "'" + type + "' is not supported (only text parts)");
    if (!part.contains("text") || !part["text"].is_string()) fail(where + ".text", "must be a string");
    text += part["text"].get<std::string>();
    parts.push_back({{"type", "text"}, {"text", part["text"]}});
  }
  if (found.empty()) return text;
  images->insert(images->end(), found.begin(), found.end());
  return parts;
}

ordered_json normalized_tool_call(const ordered_json& call, const std::string& path) {
  if (!call.is_object()) fail(path, "must be an object");
  if (call.contains("type") && call["type"] != "function") fail(path + ".type", "must be \"function\"");
  if (!call.contains("function") || !call["function"].is_object()) fail(path + ".function", "must be an object");
  const ordered_json& function = call["function"];
  if (!function.contains("name") || !function["name"].is_string()) fail(path + ".function.name", "must be a string");
  ordered_json out = ordered_json::object();
  if (call.contains("id")) {
    if (!call["id"].is_string()) fail(path + ".id", "must be a string");
    out["id"] = call["id"];
  }
  out["type"] = "function";
  ordered_json f = ordered_json::object();
  f["name"] = function["name"];
  const std::string args_path = path + ".function.arguments";
  ordered_json args = function.contains("arguments") ? function["arguments"] : ordered_json::object();
  if (args.is_string()) {
    const std::string text = args.get<std::string>();
    try {
      args = text.empty() ? ordered_json::object() : ordered_json::parse(text);
    } catch (const ordered_json::exception&) {
      fail(args_path, "is not valid JSON");
    }
  }
  if (!args.is_object()) fail(args_path, "must be a JSON object (or a string holding one)");
  f["arguments"] = std::move(args);
  out["function"] = std::move(f);
  return out;
}

ordered_json normalized_message(const ordered_json& m, const std::string& path, std::vector<MessageImage>* images) {
  if (!m.is_object()) fail(path, "must be an object");
  if (!m.contains("role") || !m["role"].is_string()) fail(path + ".role", "must be a string");
  std::string role = m["role"].get<std::string>();
  if (role == "developer") role = "system";
  if (role != "system" && role != "user" && role != "assistant" && role != "tool")
    fail(path + ".role", "'" + role + "' is not one of system, developer, user, assistant, tool");
  ordered_json out = ordered_json::object();
  out["role"] = role;
  const bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
  if (!m.contains("content") && !(role == "assistant" && has_calls)) fail(path + ".content", "is missing");
  out["content"] = normalized_content(m.value("content", ordered_json()), path + ".content", role, images);
  if (m.contains("name")) {
    if (!m["name"].is_string()) fail(path + ".name", "must be a string");
    out["name"] = m["name"];
  }
  if (role == "assistant") {
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_null()) {
      if (!m["reasoning_content"].is_string()) fail(path + ".reasoning_content", "must be a string");
      out["reasoning_content"] = m["reasoning_content"];
    }
    if (has_calls) {
      const ordered_json& calls = m["tool_calls"];
      if (!calls.is_array()) fail(path + ".tool_calls", "must be a list");
      ordered_json list = ordered_json::array();
      for (size_t i = 0; i < calls.size(); ++i) list.push_back(normalized_tool_call(calls[i], at(path + ".tool_calls", i)));
      out["tool_calls"] = std::move(list);
    }
  } else if (has_calls) {
    fail(path + ".tool_calls", "only assistant messages have tool calls");
  }
  if (role == "tool" && m.contains("tool_call_id")) {
    if (!m["tool_call_id"].is_string()) fail(path + ".tool_call_id", "must be a string");
    out["tool_call_id"] = m["tool_call_id"];
  }
  return out;
}

}  // namespace

ordered_json normalize_messages(const ordered_json& messages, std::vector<MessageImage>* images) {
  if (!messages.is_array()) fail("messages", "must be a list");
  if (messages.empty()) fail("messages", "must not be empty");
  if (messages.size() > kMaxMessages) fail("messages", "more than " + std::to_string(kMaxMessages) + " messages");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) out.push_back(normalized_message(messages[i], at("messages", i), images));
  return out;
}

ordered_json checked_tools(const ordered_json& tools) {
  if (tools.is_null()) return tools;
  if (!tools.is_array()) fail("tools", "must be a list");
  for (size_t i = 0; i < tools.size(); ++i) {
    const ordered_json& t = tools[i];
    const std::string path = at("tools", i);
    if (!t.is_object()) fail(path, "must be an object");
    if (t.contains("type") && t["type"] != "function") fail(path + ".type", "must be \"function\"");
    if (!t.contains("function") || !t["function"].is_object()) fail(path + ".function", "must be an object");
    const ordered_json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || f["name"].get<std::string>().empty())
      fail(path + ".function.name", "must be a non-empty string");
    if (f.contains("parameters") && !f["parameters"].is_object() && !f["parameters"].is_null())
      fail(path + ".function.parameters", "must be a JSON schema object");
  }
  return tools;
}

ordered_json message_json(const ChatMessage& m) {
  ordered_json j = ordered_json::object();
  j["role"] = m.role;
  j["content"] = m.content;
  if (!m.images.empty()) {  // the images first, then the text
    ordered_json parts = ordered_json::array();
    for (const ImageInput& image : m.images) {
      ordered_json part = {{"type", "image"}};
      if (!image.origin.empty()) part["image"] = image.origin;
      parts.push_back(std::move(part));
    }
    if (!m.content.empty()) parts.push_back({{"type", "text"}, {"text", m.content}});
    j["content"] = std::move(parts);
  }
  if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
  if (!m.tool_calls.empty()) {
    j["tool_calls"] = ordered_json::array();
    for (const ToolCall& call : m.tool_calls) {
      ordered_json c = {{"type", "function"}, {"function", {{"name", call.name}}}};
      if (!call.id.empty()) c["id"] = call.id;
      c["function"]["arguments"] = call.arguments;  // a JSON string, parsed (and checked) below
      j["tool_calls"].push_back(std::move(c));
    }
  }
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.name.empty()) j["name"] = m.name;
  std::vector<MessageImage> images;
  ordered_json out = normalize_messages(ordered_json::array({j}), &images)[0];  // the same checks as any other message
  // The template reads {"type": "image"}; the origin stays (a saved chat's messages name their images).
  if (out["content"].is_array())
    for (size_t i = 0, k = 0; i < out["content"].size(); ++i)
      if (out["content"][i]["type"] == "image" && !images.at(k++).source.empty())
        out["content"][i]["image"] = images[k - 1].source;
  return out;
}

ChatMessage message_from_json(const ordered_json& j) {
  ChatMessage m;
  m.role = j.value("role", "");
  if (j.contains("content") && j["content"].is_string()) m.content = j["content"].get<std::string>();
  if (j.contains("content") && j["content"].is_array()) {
    for (const ordered_json& part : j["content"]) {
      if (part.value("type", "") == "text") m.content += part.value("text", "");
      else if (part.value("type", "") == "image") m.images.push_back({{}, part.value("image", "")});
    }
  }
  if (j.contains("reasoning_content") && j["reasoning_content"].is_string())
    m.reasoning_content = j["reasoning_content"].get<std::string>();
  if (j.contains("tool_calls"))
    for (const ordered_json& c : j["tool_calls"])
      m.tool_calls.push_back({c.value("id", ""), c["function"]["name"].get<std::string>(), c["function"]["arguments"].dump()});
  if (j.contains("tool_call_id")) m.tool_call_id = j["tool_call_id"].get<std::string>();
  if (j.contains("name")) m.name = j["name"].get<std::string>();
  return m;
}

ordered_json messages_json(const std::vector<ChatMessage>& messages) {
  ordered_json list = ordered_json::array();
  for (const ChatMessage& m : messages) list.push_back(message_json(m));
  return list;
}

}  // namespace deltagen
