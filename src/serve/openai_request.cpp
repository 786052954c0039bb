#include "serve/openai_request.h"
#include "serve/scheduler.h"

#include <cmath>

#include "chat/messages.h"

namespace deltagen::serve {
using nlohmann::ordered_json;

namespace {

constexpr size_t kMaxStops = 16;
constexpr size_t kMaxStopBytes = 1000;

void bad_type(const std::string& param, const char* expected) { bad_request(param, std::string("must be ") + expected); }

// The field when it is there and not null.
const ordered_json* field(const ordered_json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::optional<bool> get_bool(const ordered_json& body, const char* key) {
  const ordered_json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_type(key, "a boolean");
  return v->get<bool>();
}

std::optional<int64_t> get_int(const ordered_json& body, const char* key, int64_t lo, int64_t hi) {
  const ordered_json* v = field(body, key);
  if (!v) return std::nullopt;
  // 5.0 is an integer in JSON's eyes, and clients written in JavaScript send it.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < double(lo) || d > double(hi))
      bad_request(key, "must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi));
    return int64_t(d);
  }
  if (!v->is_number_integer()) bad_type(key, "an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
    bad_request(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  const int64_t i = v->get<int64_t>();
  if (i < lo || i > hi) bad_request(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return i;
}

std::optional<double> get_number(const ordered_json& body, const char* key, double lo, double hi) {
  const ordered_json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_type(key, "a number");
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi)) {
    char range[96];
    std::snprintf(range, sizeof range, "must be between %g and %g", lo, hi);
    bad_request(key, range);
  }
  return d;
}

std::vector<std::string> get_stop(const ordered_json& body) {
  const ordered_json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > kMaxStops) bad_request("stop", "at most " + std::to_string(kMaxStops) + " stop sequences");
    for (const ordered_json& s : *v) {
      if (!s.is_string()) bad_type("stop", "a string or a list of strings");
      stops.push_back(s.get<std::string>());
    }
  } else {
    bad_type("stop", "a string or a list of strings");
  }
  for (const std::string& s : stops) {
    if (s.empty()) bad_request("stop", "a stop sequence must not be empty");
    if (s.size() > kMaxStopBytes) bad_request("stop", "a stop sequence is longer than " + std::to_string(kMaxStopBytes) + " bytes");
  }
  return stops;
}

void parse_response_format(const ordered_json& body, CompletionParams& p) {
  const ordered_json* v = field(body, "response_format");
  if (!v) return;
  if (!v->is_object() || !v->contains("type") || !(*v)["type"].is_string())
    bad_type("response_format", "an object with a string 'type'");
  const std::string type = (*v)["type"].get<std::string>();
  if (type == "text") return;
  if (type == "json_object") {
    p.response_format = ResponseFormat::JsonObject;
    return;
  }
  if (type != "json_schema")
    bad_request("response_format.type", "'" + type + "' is not one of text, json_object, json_schema");
  const ordered_json* spec = field(*v, "json_schema");
  if (!spec || !spec->is_object()) bad_type("response_format.json_schema", "an object");
  const ordered_json* schema = field(*spec, "schema");
  if (!schema || !(schema->is_object() || schema->is_boolean()))
    bad_type("response_format.json_schema.schema", "a JSON schema object");
  p.response_format = ResponseFormat::JsonSchema;
  p.json_schema = *schema;
}

void parse_common(const ordered_json& body, const SamplingOptions& defaults, CompletionParams& p) {
  if (const ordered_json* model = field(body, "model"); model && !model->is_string()) bad_type("model", "a string");
  p.stream = get_bool(body, "stream").value_or(false);
  if (const ordered_json* o = field(body, "stream_options")) {
    if (!o->is_object()) bad_type("stream_options", "an object");
    if (!p.stream) bad_request("stream_options", "is only allowed with \"stream\": true");
    p.include_usage = get_bool(*o, "include_usage").value_or(false);
  }
  if (auto n = get_int(body, "n", 1, 1 << 20); n && *n != 1) bad_request("n", "only n = 1 is supported");

  // max_completion_tokens is the newer name; it wins when both are there.
  p.max_tokens = get_int(body, "max_tokens", 1, INT64_MAX);
  if (auto m = get_int(body, "max_completion_tokens", 1, INT64_MAX)) p.max_tokens = m;

  SamplingOptions& s = p.sampling;
  s = defaults;
  if (auto v = get_number(body, "temperature", 0, 2)) s.temperature = *v;
  if (auto v = get_number(body, "top_p", 0, 1)) {
    if (*v <= 0) bad_request("top_p", "must be greater than 0");
    s.top_p = *v;
  }
  if (auto v = get_int(body, "top_k", 0, INT64_MAX)) s.top_k = *v;
  if (auto v = get_number(body, "min_p", 0, 1)) s.min_p = *v;
  if (auto v = get_number(body, "presence_penalty", -2, 2)) s.presence_penalty = *v;
  if (auto v = get_number(body, "frequency_penalty", -2, 2)) s.frequency_penalty = *v;
  if (auto v = get_number(body, "repetition_penalty", 0, 10)) {
    if (*v <= 0) bad_request("repetition_penalty", "must be greater than 0");
    s.repetition_penalty = *v;
  }
  if (auto v = get_int(body, "seed", INT64_MIN, INT64_MAX)) {
    s.seed = uint64_t(*v);
    p.seed_given = true;
  }
  p.stop = get_stop(body);
  p.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  parse_response_format(body, p);
}

}  // namespace

void bad_request(const std::string& param, const std::string& problem) {
  throw ApiError(400, "invalid_request_error", param, param + ": " + problem);
}

ordered_json parse_body(std::string_view body) {
  ordered_json j;
  try {
    j = ordered_json::parse(body);
  } catch (const ordered_json::parse_error& e) {
    throw ApiError(400, "invalid_request_error", "", "the request body is not valid JSON (at byte " +
                                                         std::to_string(e.byte) + ")");
  } catch (const ordered_json::exception& e) {
    // Valid JSON the parser still refuses: a number beyond a double (1e400).
    throw ApiError(400, "invalid_request_error", "", std::string("the request body cannot be read: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, "invalid_request_error", "", "the request body must be a JSON object");
  return j;
}

ChatParams parse_chat_params(const ordered_json& body, const SamplingOptions& defaults) {
  ChatParams p;
  parse_common(body, defaults, p);
  if (!body.contains("messages")) bad_request("messages", "is required");
  try {
    p.messages = normalize_messages(body["messages"], &p.images);
    p.tools = checked_tools(body.value("tools", ordered_json()));
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    // normalize_messages names the field first: "messages[1].role: ..."
    const std::string message = e.what();
    throw ApiError(400, "invalid_request_error", message.substr(0, message.find(':')), message);
  }
  if (const ordered_json* choice = field(body, "tool_choice")) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c != "none" && c != "auto" && c != "required")
        bad_request("tool_choice", "'" + c + "' is not one of none, auto, required");
      if (c == "none") p.tools = nullptr;
    } else if (!choice->is_object()) {
      bad_type("tool_choice", "a string or an object");
    }
  }
  if (get_bool(body, "logprobs").value_or(false)) {
    p.top_logprobs = get_int(body, "top_logprobs", 0, kMaxTopLogprobs).value_or(0);
  } else if (field(body, "top_logprobs")) {
    bad_request("top_logprobs", "needs \"logprobs\": true");
  }
  if (const ordered_json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) bad_type("chat_template_kwargs", "an object");
    p.template_kwargs = *kwargs;
  }
  // vLLM and llama-server also take it at the top level.
  if (auto thinking = get_bool(body, "enable_thinking")) p.template_kwargs["enable_thinking"] = *thinking;
  return p;
}

TextParams parse_text_params(const ordered_json& body, const SamplingOptions& defaults) {
  TextParams p;
  parse_common(body, defaults, p);
  const ordered_json* prompt = field(body, "prompt");
  if (!prompt) bad_request("prompt", "is required");
  // A string, a list of token ids, or a list holding one of those.
  const ordered_json* one = prompt;
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    one = &(*prompt)[0];
  if (one->is_string()) {
    p.prompt = one->get<std::string>();
  } else if (one->is_array() && !one->empty() && (*one)[0].is_number_integer()) {
    for (const ordered_json& id : *one) {
      if (!id.is_number_integer()) bad_type("prompt", "a string or a list of token ids");
      p.prompt_ids.push_back(id.get<int64_t>());
    }
  } else if (prompt->is_array() && prompt->size() > 1 && (*prompt)[0].is_string()) {
    bad_request("prompt", "only one prompt per request is supported");
  } else {
    bad_type("prompt", "a string or a list of token ids");
  }
  p.echo = get_bool(body, "echo").value_or(false);
  if (field(body, "suffix")) bad_request("suffix", "is not supported");
  if (auto n = get_int(body, "logprobs", 0, 5)) p.top_logprobs = *n;  // the legacy API: an integer
  return p;
}

}  // namespace deltagen::serve
