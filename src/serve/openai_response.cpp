#include "serve/openai_response.h"

#include "tokenizer/utf8.h"

namespace deltagen::serve {
using nlohmann::ordered_json;

std::string token_text(const Tokenizer& tokenizer, int64_t id) {
  tok::LossyUtf8Decoder decoder;
  std::string text;
  decoder.feed(tokenizer.token_bytes(id), text);
  decoder.flush(text);
  return text;
}

namespace {

ordered_json bytes_json(const std::string& bytes) {
  ordered_json list = ordered_json::array();
  for (unsigned char b : bytes) list.push_back(int(b));
  return list;
}

// One entry of a chat reply's logprobs.content.
ordered_json chat_logprob(const Tokenizer& tokenizer, const TokenEvent& e) {
  auto entry = [&](const TokenLogprob& t) {
    ordered_json j;
    j["token"] = token_text(tokenizer, t.id);
    j["logprob"] = t.logprob;
    j["bytes"] = bytes_json(tokenizer.token_bytes(t.id));
    return j;
  };
  ordered_json j = entry(e.logprobs->chosen);
  j["top_logprobs"] = ordered_json::array();
  for (const TokenLogprob& t : e.logprobs->top) j["top_logprobs"].push_back(entry(t));
  return j;
}

// What every response and chunk of a request carries around its choices.
ordered_json envelope(const ReplyHeader& header, const char* object, ordered_json choices) {
  ordered_json c;
  c["id"] = header.id;
  c["object"] = object;
  c["created"] = header.created;
  c["model"] = header.model;
  c["system_fingerprint"] = "deltagen";
  c["choices"] = std::move(choices);
  return c;
}

// A stream's last chunk with stream_options.include_usage: no choices, the usage.
ordered_json usage_only(const ReplyHeader& header, const char* object, const SequenceEnd& end) {
  ordered_json c = envelope(header, object, ordered_json::array());
  c["usage"] = usage_json(end);
  return c;
}

}  // namespace

std::string finish_reason(const SequenceEnd& end, bool called_tools) {
  switch (end.stop_reason) {
    case StopReason::MaxNewTokens:
    case StopReason::Length: return "length";
    case StopReason::Eos: return called_tools ? "tool_calls" : "stop";
    case StopReason::StopString:
    case StopReason::Cancelled: return "stop";
  }
  return "stop";
}

ordered_json usage_json(const SequenceEnd& end) {
  const int64_t completion = int64_t(end.generated_ids.size());
  ordered_json u;
  u["prompt_tokens"] = end.prompt_tokens;
  u["completion_tokens"] = completion;
  u["total_tokens"] = end.prompt_tokens + completion;
  u["prompt_tokens_details"] = {{"cached_tokens", end.cached_tokens}};
  return u;
}

ordered_json timings_json(const SequenceEnd& end) {
  const int64_t steps = std::max<int64_t>(0, int64_t(end.generated_ids.size()) - 1);
  ordered_json t;
  t["cache_n"] = end.cached_tokens;
  t["prompt_n"] = end.prefilled_tokens;
  t["prompt_ms"] = end.prefill_seconds * 1000;
  t["prompt_per_second"] = end.prefill_seconds > 0 ? double(end.prefilled_tokens) / end.prefill_seconds : 0.0;
  t["predicted_n"] = int64_t(end.generated_ids.size());
  t["predicted_ms"] = end.decode_seconds * 1000;
  t["predicted_per_second"] = end.decode_seconds > 0 ? double(steps) / end.decode_seconds : 0.0;
  t["queue_ms"] = end.queue_seconds * 1000;
  t["stream_ms"] = end.stream_seconds * 1000;
  return t;
}

ordered_json error_json(const std::string& message, const std::string& type, const std::string& param,
                        const std::string& code) {
  ordered_json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? ordered_json() : ordered_json(param);
  e["code"] = code.empty() ? ordered_json() : ordered_json(code);
  return {{"error", e}};
}

// ---- chat -----------------------------------------------------------------------

ChatReply::ChatReply(const ReplyHeader& header, const Tokenizer& tokenizer, const ChatOutputParserOptions& parser,
                     bool logprobs)
    : header_(header), tokenizer_(tokenizer), parser_(parser), logprobs_(logprobs) {}

ordered_json ChatReply::chunk(ordered_json delta, ordered_json logprobs, ordered_json finish) const {
  ordered_json choice;
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = std::move(finish);
  return envelope(header_, "chat.completion.chunk", ordered_json::array({std::move(choice)}));
}

ordered_json ChatReply::role_chunk() const {
  return chunk({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
}

ordered_json ChatReply::delta_json(const ChatDelta& d) {
  ordered_json delta = ordered_json::object();
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) {
    ordered_json calls = ordered_json::array();
    for (const ToolCall& call : d.tool_calls) {
      ordered_json c;
      c["index"] = tool_calls_sent_++;
      c["id"] = call.id;
      c["type"] = "function";
      c["function"] = {{"name", call.name}, {"arguments", call.arguments}};
      calls.push_back(std::move(c));
    }
    delta["tool_calls"] = std::move(calls);
  }
  return delta;
}

std::vector<ordered_json> ChatReply::push(const std::vector<TokenEvent>& events) {
  ChatDelta d;
  for (const TokenEvent& e : events) {
    d.append(parser_.push(e.text));
    if (logprobs_ && e.logprobs) {
      ordered_json entry = chat_logprob(tokenizer_, e);
      pending_logprobs_.push_back(entry);
      all_logprobs_.push_back(std::move(entry));
    }
  }
  if (d.empty()) return {};
  ordered_json logprobs = nullptr;
  if (logprobs_) {
    logprobs = {{"content", pending_logprobs_}};
    pending_logprobs_ = ordered_json::array();
  }
  return {chunk(delta_json(d), std::move(logprobs), nullptr)};
}

std::vector<ordered_json> ChatReply::finish(const SequenceEnd& end) {
  std::vector<ordered_json> out;
  const ChatDelta rest = parser_.finish();
  ordered_json logprobs = nullptr;
  if (logprobs_) logprobs = {{"content", pending_logprobs_}};
  pending_logprobs_ = ordered_json::array();
  if (!rest.empty()) {
    out.push_back(chunk(delta_json(rest), std::move(logprobs), nullptr));
    logprobs = logprobs_ ? ordered_json{{"content", ordered_json::array()}} : ordered_json();
  }
  ordered_json last = chunk(ordered_json::object(), std::move(logprobs),
                            finish_reason(end, !parser_.total().tool_calls.empty()));
  last["timings"] = timings_json(end);
  out.push_back(std::move(last));
  return out;
}

ordered_json ChatReply::usage_chunk(const SequenceEnd& end) const {
  return usage_only(header_, "chat.completion.chunk", end);
}

ordered_json ChatReply::completion(const SequenceEnd& end) const {
  const ChatDelta& total = parser_.total();
  ordered_json message;
  message["role"] = "assistant";
  // OpenAI sends null content with tool calls and nothing else.
  message["content"] = total.content.empty() && !total.tool_calls.empty() ? ordered_json() : ordered_json(total.content);
  if (!total.reasoning.empty()) message["reasoning_content"] = total.reasoning;
  if (!total.tool_calls.empty()) {
    ordered_json calls = ordered_json::array();
    for (const ToolCall& call : total.tool_calls)
      calls.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    message["tool_calls"] = std::move(calls);
  }
  ordered_json choice;
  choice["index"] = 0;
  choice["message"] = std::move(message);
  choice["logprobs"] = logprobs_ ? ordered_json{{"content", all_logprobs_}} : ordered_json();
  choice["finish_reason"] = finish_reason(end, !total.tool_calls.empty());
  ordered_json r = envelope(header_, "chat.completion", ordered_json::array({std::move(choice)}));
  r["usage"] = usage_json(end);
  r["timings"] = timings_json(end);
  return r;
}

// ---- text completions ---------------------------------------------------------------

TextReply::TextReply(const ReplyHeader& header, const Tokenizer* tokenizer, std::string echo, int64_t top_logprobs)
    : header_(header), tokenizer_(tokenizer), echo_(std::move(echo)), top_logprobs_(top_logprobs) {
  if (top_logprobs_ >= 0)
    all_logprobs_ = {{"tokens", ordered_json::array()},
                     {"token_logprobs", ordered_json::array()},
                     {"top_logprobs", ordered_json::array()},
                     {"text_offset", ordered_json::array()}};
}

ordered_json TextReply::chunk(const std::string& text, ordered_json logprobs, ordered_json finish) const {
  ordered_json choice;
  choice["text"] = text;
  choice["index"] = 0;
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = std::move(finish);
  return envelope(header_, "text_completion", ordered_json::array({std::move(choice)}));
}

// The legacy logprobs of these tokens ({tokens, token_logprobs, top_logprobs,
// text_offset}), also appended to the whole reply's.
ordered_json TextReply::logprobs_of(const std::vector<TokenEvent>& events, size_t text_offset) {
  if (top_logprobs_ < 0 || !tokenizer_) return nullptr;
  ordered_json part = {{"tokens", ordered_json::array()},
                       {"token_logprobs", ordered_json::array()},
                       {"top_logprobs", ordered_json::array()},
                       {"text_offset", ordered_json::array()}};
  size_t offset = text_offset;
  for (const TokenEvent& e : events) {
    if (!e.logprobs) continue;
    ordered_json top = ordered_json::object();
    for (const TokenLogprob& t : e.logprobs->top) top[token_text(*tokenizer_, t.id)] = t.logprob;
    part["tokens"].push_back(token_text(*tokenizer_, e.token));
    part["token_logprobs"].push_back(e.logprobs->chosen.logprob);
    part["top_logprobs"].push_back(std::move(top));
    part["text_offset"].push_back(offset);
    offset += e.text.size();
  }
  for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const ordered_json& v : part[key]) all_logprobs_[key].push_back(v);
  return part;
}

std::vector<ordered_json> TextReply::push(const std::vector<TokenEvent>& events) {
  std::string text;
  if (!echo_sent_) {
    text = echo_;
    echo_sent_ = true;
  }
  const size_t offset = text_.size() + text.size();
  for (const TokenEvent& e : events) text += e.text;
  ordered_json logprobs = logprobs_of(events, offset);
  if (text.empty() && (logprobs.is_null() || logprobs["tokens"].empty())) return {};
  text_ += text;
  return {chunk(text, std::move(logprobs), nullptr)};
}

std::vector<ordered_json> TextReply::finish(const SequenceEnd& end) {
  std::vector<ordered_json> out = push({});  // the echo, when nothing was generated
  ordered_json c = chunk("", nullptr, finish_reason(end, false));
  c["timings"] = timings_json(end);
  out.push_back(std::move(c));
  return out;
}

ordered_json TextReply::usage_chunk(const SequenceEnd& end) const {
  return usage_only(header_, "text_completion", end);
}

ordered_json TextReply::completion(const SequenceEnd& end) const {
  ordered_json c = chunk(echo_ + end.text, top_logprobs_ >= 0 ? all_logprobs_ : ordered_json(), finish_reason(end, false));
  c["usage"] = usage_json(end);
  c["timings"] = timings_json(end);
  return c;
}

}  // namespace deltagen::serve
