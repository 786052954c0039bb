// Fuzzes what `deltagen serve` does with a request body before any model
// work: serve::parse_body, then parse_chat_params (which runs
// normalize_messages and checked_tools) and parse_text_params on the same
// JSON, and normalize_messages / checked_tools on the body's "messages" and
// "tools" directly (whatever their type).
//
// Contract: every bad body is an ApiError (an HTTP 4xx with an OpenAI error
// object); anything else escaping (nlohmann's type_error from a field read
// with the wrong type, a crash, a sanitizer report) is a finding. The
// normalizers alone throw deltagen::Error naming the field.
// Properties of what is accepted:
//   - the settings are in range: max_tokens >= 1, temperature in [0, 2],
//     top_p in (0, 1], top_logprobs in [-1, 20], at most 16 stop strings;
//   - messages come out as a non-empty list of objects with a known role and
//     string or null content; tool call arguments are JSON objects;
//   - normalizing is idempotent: normalize(normalize(m)) == normalize(m).
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/messages.h"
#include "fuzz_util.h"
#include "serve/openai_request.h"

using namespace deltagen;
using nlohmann::ordered_json;

namespace {

// Runs fn(): returns true if it returned; an ApiError with a 4xx status is an
// accepted rejection (false); anything else is a finding.
template <class Fn>
bool expect_api_error(const char* what, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const serve::ApiError& e) {
    if (e.status < 400 || e.status > 499) fuzz::finding(std::string(what) + ": ApiError status " + std::to_string(e.status));
    if (e.type.empty()) fuzz::finding(std::string(what) + ": ApiError without a type");
    if (std::string_view(e.what()).find('\n') != std::string_view::npos)
      fuzz::finding(std::string(what) + ": message is not one line: " + e.what());
    return false;
  } catch (const std::exception& e) {
    fuzz::finding(std::string(what) + ": threw something other than ApiError: " + e.what());
  } catch (...) {
    fuzz::finding(std::string(what) + ": threw something that is not a std::exception");
  }
}

void check_common(const serve::CompletionParams& p, const char* what) {
  const std::string w = what;
  if (p.max_tokens && *p.max_tokens < 1) fuzz::finding(w + ": max_tokens < 1 accepted");
  if (!(p.sampling.temperature >= 0 && p.sampling.temperature <= 2)) fuzz::finding(w + ": temperature out of range");
  if (!(p.sampling.top_p > 0 && p.sampling.top_p <= 1)) fuzz::finding(w + ": top_p out of range");
  if (!(p.sampling.min_p >= 0 && p.sampling.min_p <= 1)) fuzz::finding(w + ": min_p out of range");
  if (p.sampling.top_k < 0) fuzz::finding(w + ": top_k < 0 accepted");
  if (p.top_logprobs < -1 || p.top_logprobs > 20) fuzz::finding(w + ": top_logprobs out of range");
  if (p.stop.size() > 16) fuzz::finding(w + ": more than 16 stop strings");
  for (const std::string& s : p.stop)
    if (s.empty()) fuzz::finding(w + ": an empty stop string accepted");
  if (p.include_usage && !p.stream) fuzz::finding(w + ": stream_options without stream accepted");
}

void check_messages(const ordered_json& messages) {
  if (!messages.is_array() || messages.empty()) fuzz::finding("normalized messages: not a non-empty list");
  for (const ordered_json& m : messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) fuzz::finding("normalized message without a role");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      fuzz::finding("normalized message with role " + role);
    if (!m.contains("content") || !(m["content"].is_string() || m["content"].is_null()))
      fuzz::finding("normalized content is not a string or null");
    if (m.contains("tool_calls"))
      for (const ordered_json& call : m["tool_calls"])
        if (!call["function"]["arguments"].is_object()) fuzz::finding("normalized tool call arguments are not an object");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  ordered_json j;
  if (!expect_api_error("parse_body", [&] { j = serve::parse_body(body); })) return 0;
  if (!j.is_object()) fuzz::finding("parse_body accepted a body that is not an object");

  SamplingOptions defaults;
  defaults.temperature = 0.7;
  defaults.top_p = 0.8;
  defaults.top_k = 20;
  serve::ChatParams chat;
  if (expect_api_error("parse_chat_params", [&] { chat = serve::parse_chat_params(j, defaults); })) {
    check_common(chat, "chat");
    check_messages(chat.messages);
    if (!chat.tools.is_null() && !chat.tools.is_array()) fuzz::finding("chat: tools neither null nor a list");
    if (!chat.template_kwargs.is_object()) fuzz::finding("chat: chat_template_kwargs is not an object");
    ordered_json again;
    if (!fuzz::expect_only_error("normalize_messages (again)", [&] { again = normalize_messages(chat.messages); }))
      fuzz::finding("normalize_messages refused its own output");
    if (again != chat.messages) fuzz::finding("normalize_messages is not idempotent");
  }
  serve::TextParams text;
  if (expect_api_error("parse_text_params", [&] { text = serve::parse_text_params(j, defaults); })) {
    check_common(text, "text");
    if (text.prompt.has_value() == !text.prompt_ids.empty()) fuzz::finding("text: not exactly one of prompt and prompt_ids");
  }

  // The normalizers on whatever the body holds: Error or success, nothing else.
  if (auto it = j.find("messages"); it != j.end()) {
    ordered_json m;
    if (fuzz::expect_only_error("normalize_messages", [&] { m = normalize_messages(*it); })) check_messages(m);
  }
  if (auto it = j.find("tools"); it != j.end()) fuzz::expect_only_error("checked_tools", [&] { checked_tools(*it); });
  return 0;
}
