// OpenAI's response shapes, built from what a sequence produced:
// chat.completion and its chat.completion.chunk stream (reasoning_content,
// content and tool_calls split by chat/output_parser.h), text_completion and
// its stream, usage with prompt_tokens_details.cached_tokens, logprobs, and
// llama-server's "timings" (the web page shows tokens/s and cached tokens).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "serve/sequence_stream.h"
#include "tokenizer/tokenizer.h"

namespace deltagen::serve {

// What every response of one request carries.
struct ReplyHeader {
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;
  std::string model;
};

// "stop" (EOS, stop string), "length" (max_tokens, the context), or
// "tool_calls" when the reply called tools.
std::string finish_reason(const SequenceEnd& end, bool called_tools);
nlohmann::ordered_json usage_json(const SequenceEnd& end);
nlohmann::ordered_json timings_json(const SequenceEnd& end);
// {"error": {...}} for an ApiError's fields.
nlohmann::ordered_json error_json(const std::string& message, const std::string& type, const std::string& param,
                                  const std::string& code);

// A chat reply as it streams: token events in, deltas out; the whole
// message and its logprobs at the end.
class ChatReply {
 public:
  ChatReply(const ReplyHeader& header, const Tokenizer& tokenizer, const ChatOutputParserOptions& parser,
            bool logprobs);

  // The chunks these tokens complete (none while the parser holds text back).
  std::vector<nlohmann::ordered_json> push(const std::vector<TokenEvent>& events);
  // The last chunks: the rest of the text, then the finish_reason chunk.
  std::vector<nlohmann::ordered_json> finish(const SequenceEnd& end);
  // The first chunk of a stream: the assistant role, empty content.
  nlohmann::ordered_json role_chunk() const;
  // With stream_options.include_usage: the chunk with no choices and the usage.
  nlohmann::ordered_json usage_chunk(const SequenceEnd& end) const;
  // The non-streamed response, after finish().
  nlohmann::ordered_json completion(const SequenceEnd& end) const;

 private:
  nlohmann::ordered_json chunk(nlohmann::ordered_json delta, nlohmann::ordered_json logprobs,
                               nlohmann::ordered_json finish) const;
  nlohmann::ordered_json delta_json(const ChatDelta& delta);

  ReplyHeader header_;
  const Tokenizer& tokenizer_;
  ChatOutputParser parser_;
  bool logprobs_;
  nlohmann::ordered_json pending_logprobs_ = nlohmann::ordered_json::array();  // not yet sent in a chunk
  nlohmann::ordered_json all_logprobs_ = nlohmann::ordered_json::array();
  int64_t tool_calls_sent_ = 0;
};

// A text completion (/v1/completions), streamed or whole.
class TextReply {
 public:
  TextReply(const ReplyHeader& header, const Tokenizer* tokenizer, std::string echo, int64_t top_logprobs);

  std::vector<nlohmann::ordered_json> push(const std::vector<TokenEvent>& events);  // a chunk, when there is text
  std::vector<nlohmann::ordered_json> finish(const SequenceEnd& end);        // the finish_reason chunk
  nlohmann::ordered_json usage_chunk(const SequenceEnd& end) const;
  nlohmann::ordered_json completion(const SequenceEnd& end) const;

 private:
  nlohmann::ordered_json chunk(const std::string& text, nlohmann::ordered_json logprobs,
                               nlohmann::ordered_json finish) const;
  nlohmann::ordered_json logprobs_of(const std::vector<TokenEvent>& events, size_t text_offset);

  ReplyHeader header_;
  const Tokenizer* tokenizer_;
  std::string echo_;
  bool echo_sent_ = false;
  int64_t top_logprobs_;
  std::string text_;  // everything streamed so far (echo included)
  nlohmann::ordered_json all_logprobs_;
};

// A token as OpenAI's logprobs show it: its bytes as text (invalid UTF-8
// replaced), and the bytes themselves.
std::string token_text(const Tokenizer& tokenizer, int64_t id);

}  // namespace deltagen::serve
