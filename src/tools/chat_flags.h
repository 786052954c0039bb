// Flags that say what a chat template renders, shared by `generate --chat`
// and `chat`: --system TEXT, --no-think, --tools FILE (a JSON list of OpenAI
// tool definitions), --chat-kwargs JSON (any template variable, including
// add_generation_prompt and enable_thinking), and for generate --messages
// FILE (an OpenAI messages array).
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "tools/args.h"

namespace deltagen {

struct ChatFlags {
  std::string system_prompt;
  bool thinking = true;
  std::string tools_json;                    // file contents; empty = none
  std::string kwargs_json;                   // empty = none
  std::optional<nlohmann::ordered_json> messages;  // from --messages
};

ChatFlags parse_chat_flags(Args& args, bool with_messages);

// The render inputs for `messages` (the file's, or one user message): the
// system prompt first when given and the messages have none; tools; kwargs
// with enable_thinking false from --no-think unless they set it. Errors name the
// flag (and the message field).
// `images` > 0: the user message gets that many image parts before its text.
ChatRenderInputs chat_inputs(const ChatFlags& flags, const std::string& user_text, int64_t images = 0);

}  // namespace deltagen
