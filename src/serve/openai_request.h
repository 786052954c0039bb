// The bodies of OpenAI's /v1/chat/completions and /v1/completions, parsed
// and checked into plain settings. Every field is checked for its type and
// range; a bad one is an ApiError (HTTP 400) naming it, in OpenAI's error
// shape. Fields deltagen does not use (user, metadata, store, ...) are
// ignored, as OpenAI-compatible servers do.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/messages.h"
#include "deltagen/error.h"
#include "deltagen/options.h"

namespace deltagen::serve {

// An error the client caused or must hear about, as OpenAI reports it:
// {"error": {"message", "type", "param", "code"}} with an HTTP status.
class ApiError : public Error {
 public:
  ApiError(int status, std::string type, std::string param, const std::string& message, std::string code = {})
      : Error(message), status(status), type(std::move(type)), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string type;   // invalid_request_error, authentication_error, server_error, ...
  std::string param;  // the field, when one is to blame
  std::string code;   // e.g. context_length_exceeded
};

// A 400 invalid_request_error for `param`.
[[noreturn]] void bad_request(const std::string& param, const std::string& problem);

// The body as JSON: 400 naming the byte where it stops being JSON, or when
// it is not an object.
nlohmann::ordered_json parse_body(std::string_view body);

enum class ResponseFormat { Text, JsonObject, JsonSchema };

// What both endpoints share.
struct CompletionParams {
  bool stream = false;
  bool include_usage = false;    // stream_options.include_usage
  std::optional<int64_t> max_tokens;  // absent: until the context is full
  SamplingOptions sampling;      // the model's defaults, overridden by the request
  bool seed_given = false;
  std::vector<std::string> stop;
  bool ignore_eos = false;       // llama-server's: generate past the end-of-turn ids (benchmarks)
  int64_t top_logprobs = -1;     // -1: no logprobs
  ResponseFormat response_format = ResponseFormat::Text;
  nlohmann::ordered_json json_schema;  // with JsonSchema: the schema
};

struct ChatParams : CompletionParams {
  nlohmann::ordered_json messages;  // normalized (chat/messages.h)
  std::vector<MessageImage> images;  // the image parts' sources, in prompt order
  nlohmann::ordered_json tools;     // null or the checked list; null when tool_choice is "none"
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs (+ enable_thinking)
};

struct TextParams : CompletionParams {
  std::optional<std::string> prompt;  // text, or
  std::vector<int64_t> prompt_ids;    // token ids
  bool echo = false;                  // the reply text starts with the prompt
};

// `defaults`: the model's sampling settings (genai_config.json "search").
ChatParams parse_chat_params(const nlohmann::ordered_json& body, const SamplingOptions& defaults);
TextParams parse_text_params(const nlohmann::ordered_json& body, const SamplingOptions& defaults);

}  // namespace deltagen::serve
