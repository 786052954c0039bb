#include "runtime/chat_template.h"

#include <algorithm>
#include <optional>

#include "tokenizer/tokenizer.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

std::string message(std::string_view role, std::string_view content) {
  std::string s(kImStart);
  s += role;
  s += '\n';
  s += content;
  s += kImEnd;
  s += '\n';
  return s;
}

}  // namespace

std::string render_chat_turn(const ChatTurn& turn, PreviousTurn previous) {
  std::string text;
  switch (previous) {
    case PreviousTurn::None:
      if (!turn.system_prompt.empty()) text += message("system", turn.system_prompt);
      break;
    case PreviousTurn::EndedByEos: text += '\n'; break;
    case PreviousTurn::Unfinished:
      text += kImEnd;
      text += '\n';
      break;
  }
  text += message("user", turn.user_message);
  text += kImStart;
  text += "assistant\n";
  text += turn.thinking ? "<think>\n" : "<think>\n\n</think>\n\n";
  return text;
}

std::vector<int64_t> chat_stop_ids(const Tokenizer& tokenizer) {
  for (std::string_view token : {kImStart, kImEnd})
    if (!tokenizer.token_to_id(token))
      fail("chat", "the tokenizer has no " + std::string(token) + " token (the built-in chat format is Qwen's)");
  std::vector<int64_t> ids = {*tokenizer.token_to_id(kImEnd)};
  auto add = [&ids](std::optional<int64_t> id) {
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  };
  add(tokenizer.eos_token_id());
  add(tokenizer.token_to_id("<|endoftext|>"));
  return ids;
}

}  // namespace deltagen
