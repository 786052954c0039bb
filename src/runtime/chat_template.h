// Qwen3.5's chat format, built in (there is no Jinja interpreter; the
// chat_template in tokenizer_config.json is not read):
//
//   <|im_start|>system\n{system}<|im_end|>\n          (only with a system prompt)
//   <|im_start|>user\n{message}<|im_end|>\n
//   <|im_start|>assistant\n<think>\n                  (thinking on, Qwen3.5's default)
//   <|im_start|>assistant\n<think>\n\n</think>\n\n    (thinking off)
//   ...reply...<|im_end|>   then "\n" and the next user turn
//
// The pieces are rendered turn by turn so that a conversation's state can be
// kept: turn n's text starts where turn n-1's tokens ended. One difference
// from the Jinja template follows from that: earlier replies stay in the
// history exactly as generated, <think> blocks included (the template would
// re-render them without their reasoning, which would change the prefix the
// state was computed from).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deltagen {

class Tokenizer;

inline constexpr std::string_view kImStart = "<|im_start|>";
inline constexpr std::string_view kImEnd = "<|im_end|>";

enum class PreviousTurn {
  None,         // the conversation is empty
  EndedByEos,   // the last reply ended with <|im_end|> (already in the history)
  Unfinished,   // the last reply stopped early (max tokens, stop string): close it
};

struct ChatTurn {
  std::string system_prompt;  // used on the first turn only; empty = none
  std::string user_message;
  bool thinking = true;
};

// The text of one user turn plus the assistant's generation prompt.
std::string render_chat_turn(const ChatTurn& turn, PreviousTurn previous);

// The ids that end an assistant reply: <|im_end|>, the tokenizer's EOS and
// <|endoftext|> (those it has). Throws Error unless the tokenizer has Qwen's
// <|im_start|> and <|im_end|> tokens.
std::vector<int64_t> chat_stop_ids(const Tokenizer& tokenizer);

}  // namespace deltagen
