// OpenAI chat messages and tools, checked and brought into the shape chat
// templates expect (Hugging Face's conventions):
//   - content: a string, null, or a list of parts; text parts are joined
//     into one string (what Qwen3.5's template does with them, and the only
//     form every template reads); other parts are refused (no image input);
//   - role "developer" (OpenAI's newer name) becomes "system";
//   - tool calls' arguments, a JSON string in OpenAI's API, become the JSON
//     object the templates iterate over (an object given as such is kept);
//   - reasoning_content (deltagen's and llama-server's field for an
//     assistant's thinking) is passed on, as are tool_call_id and name.
// Errors name the field: "messages[2].tool_calls[0].function.arguments: is not valid JSON".
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "deltagen/options.h"

namespace deltagen {

// `messages` must be a non-empty array; throws Error naming the bad field.
nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages);

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
