// OpenAI chat messages and tools, checked and brought into the shape chat
// templates expect (Hugging Face's conventions):
//   - content: a string, null, or a list of parts; text parts are joined
//     into one string (what Qwen3.5's template does with them, and the only
//     form every template reads). Image parts (OpenAI's {"type": "image_url",
//     "image_url": {"url": ...}} or {"type": "image", ...}) are taken only
//     when the caller asks for them (the `images` out-param): a message that
//     holds one keeps its content as a list of parts in order, text parts as
//     {"type": "text", "text"} and each image as {"type": "image"} (what the
//     Qwen3.5 template turns into <|vision_start|><|image_pad|><|vision_end|>),
//     and the image sources are handed back in prompt order; system messages
//     may not hold images (the template refuses them too). Other parts are refused;
//   - role "developer" (OpenAI's newer name) becomes "system";
//   - tool calls' arguments, a JSON string in OpenAI's API, become the JSON
//     object the templates iterate over (an object given as such is kept);
//   - reasoning_content (deltagen's and llama-server's field for an
//     assistant's thinking) is passed on, as are tool_call_id and name.
// Errors name the field: "messages[2].tool_calls[0].function.arguments: is not valid JSON".
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deltagen/options.h"

namespace deltagen {

// An image part of a message, in the order the rendered prompt holds them.
struct MessageImage {
  // What the part names: image_url.url (or an image_url string), or an
  // "image" part's "image" / "url" / "path" string; empty when it names none
  // (a placeholder whose bytes the caller holds, as `deltagen chat` does).
  std::string source;
  std::string field;  // where it was: "messages[0].content[1].image_url.url"
};

// `messages` must be a non-empty array; throws Error naming the bad field.
// With `images` null, image parts are refused like any part but text
// ("'image_url' is not supported (only text parts)"); else they are kept
// (see above) and appended to *images.
nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages,
                                          std::vector<MessageImage>* images = nullptr);

// null (no tools) or a list of {"type": "function", "function": {"name", ...}};
// returns it unchanged (templates print it with tojson, key order kept), or
// throws Error naming the bad field.
nlohmann::ordered_json checked_tools(const nlohmann::ordered_json& tools);

// A ChatMessage as a template reads it (tool call arguments as objects), and
// back from a normalized message.
nlohmann::ordered_json message_json(const ChatMessage& message);
ChatMessage message_from_json(const nlohmann::ordered_json& normalized);
nlohmann::ordered_json messages_json(const std::vector<ChatMessage>& messages);

}  // namespace deltagen
