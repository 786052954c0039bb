#include "chat/output_parser.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "deltagen/error.h"

namespace deltagen {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";

// nlohmann parses without recursion but dump() recurses: JSON nested deeper
// than this is not taken (a value stays text, a JSON-form call is content).
constexpr int kMaxJsonDepth = 128;

// The JSON types a parameter's schema allows, as bits; 0 = unknown.
enum : unsigned {
  kString = 1,
  kInteger = 2,
  kNumber = 4,
  kBoolean = 8,
  kObject = 16,
  kArray = 32,
  kNull = 64,
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

size_t leading_space(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && is_space(s[n])) ++n;
  return n;
}

size_t trailing_space(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && is_space(s[s.size() - 1 - n])) ++n;
  return n;
}

// The longest suffix of `text` that is a proper prefix of `tag`: the next
// chunk may complete it into the tag.
size_t partial_tag_at_end(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

// The bytes at the end of `text` that start a UTF-8 sequence whose last
// bytes have not arrived: held back so that every delta is whole characters.
size_t incomplete_utf8_at_end(std::string_view text) {
  for (size_t back = 1; back <= std::min<size_t>(3, text.size()); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: the lead is further back
    const size_t length = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return length > back ? back : 0;
  }
  return 0;
}

bool nesting_within(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

std::optional<ordered_json> parse_json(std::string_view text) {
  if (!nesting_within(text, kMaxJsonDepth)) return std::nullopt;
  try {
    ordered_json j = ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return std::nullopt;
    return j;
  } catch (const ordered_json::exception&) {
    return std::nullopt;
  }
}

// Compact; text that is not UTF-8 (a model can emit any bytes) becomes U+FFFD
// rather than an exception.
std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

unsigned type_bit(const ordered_json& name) {
  if (!name.is_string()) return 0;
  const std::string& n = name.get_ref<const std::string&>();
  if (n == "string") return kString;
  if (n == "integer") return kInteger;
  if (n == "number") return kNumber;
  if (n == "boolean") return kBoolean;
  if (n == "object") return kObject;
  if (n == "array") return kArray;
  if (n == "null") return kNull;
  return 0;
}

unsigned value_type_bit(const ordered_json& value) {
  if (value.is_string()) return kString;
  if (value.is_number_integer()) return kInteger;
  if (value.is_number()) return kNumber;
  if (value.is_boolean()) return kBoolean;
  if (value.is_object()) return kObject;
  if (value.is_array()) return kArray;
  return kNull;
}

// "type" (a name or a list), else the alternatives of anyOf/oneOf (unknown if
// one of them is), else the types of enum/const values. $ref and the rest:
// unknown.
unsigned schema_types(const ordered_json& schema, int depth) {
  if (!schema.is_object() || depth > 8) return 0;
  unsigned types = 0;
  if (const auto t = schema.find("type"); t != schema.end()) {
    if (t->is_array())
      for (const ordered_json& name : *t) types |= type_bit(name);
    else
      types = type_bit(*t);
    if (types) return types;
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    const auto alternatives = schema.find(key);
    if (alternatives == schema.end() || !alternatives->is_array()) continue;
    for (const ordered_json& alternative : *alternatives) {
      const unsigned t = schema_types(alternative, depth + 1);
      if (!t) return 0;
      types |= t;
    }
  }
  if (types) return types;
  if (const auto e = schema.find("enum"); e != schema.end() && e->is_array())
    for (const ordered_json& value : *e) types |= value_type_bit(value);
  if (const auto c = schema.find("const"); c != schema.end()) types |= value_type_bit(*c);
  return types;
}

// An XML-form parameter value (text) as the JSON value the schema asks for.
// The template writes strings as they are, objects and arrays as JSON and
// other values with Python's str() (True, False, None). Where a string is
// allowed, the text stays a string: nothing is lost. Unknown types: JSON if
// the text is JSON, else the text. A value that does not fit its type stays
// text too (the server may check it against the schema).
ordered_json typed_value(std::string_view text, unsigned types) {
  if (types & kString) return std::string(text);
  const std::string_view t = trim(text);
  if (types == 0) {
    if (auto j = parse_json(t)) return *std::move(j);
    return std::string(text);
  }
  if ((types & kNull) && (t == "null" || t == "None")) return nullptr;
  if (types & kBoolean) {
    if (t == "true" || t == "True") return true;
    if (t == "false" || t == "False") return false;
  }
  if (types & (kInteger | kNumber | kObject | kArray)) {
    if (auto j = parse_json(t)) {
      // An integer's "5.0" is taken as the number it is.
      if (((types & (kInteger | kNumber)) && j->is_number()) || ((types & kObject) && j->is_object()) ||
          ((types & kArray) && j->is_array()))
        return *std::move(j);
    }
  }
  return std::string(text);
}

// splitmix64: distinct counters give distinct ids.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

void ChatDelta::append(const ChatDelta& more) {
  reasoning += more.reasoning;
  content += more.content;
  tool_calls.insert(tool_calls.end(), more.tool_calls.begin(), more.tool_calls.end());
}

ChatOutputParser::ChatOutputParser(const ChatOutputParserOptions& options)
    : options_(options),
      state_(State::Start),
      calls_enabled_(options.parse_tool_calls) {
  options_.tools = nullptr;  // not kept: the caller's object may go
  if (options.tools == nullptr || !options.tools->is_array()) return;
  for (const ordered_json& tool : *options.tools) {
    if (!tool.is_object()) continue;
    const ordered_json* function = &tool;
    if (const auto f = tool.find("function"); f != tool.end() && f->is_object()) function = &*f;
    const auto name = function->find("name");
    if (name == function->end() || !name->is_string()) continue;
    ParamTypes& types = tools_[name->get<std::string>()];
    const auto parameters = function->find("parameters");
    if (parameters == function->end() || !parameters->is_object()) continue;
    const auto properties = parameters->find("properties");
    if (properties == parameters->end() || !properties->is_object()) continue;
    for (const auto& [param, schema] : properties->items()) types[param] = schema_types(schema, 0);
  }
}

ChatDelta ChatOutputParser::push(std::string_view text) {
  if (finished_) fail("ChatOutputParser", "push() after finish()");
  buf_.append(text);
  ChatDelta out;
  advance(std::max(pos_, buf_.size() - incomplete_utf8_at_end(buf_)), false, out);
  // Drop the consumed text now and then (an open tool call is kept whole).
  if (pos_ > 4096 && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);
    close_search_ = close_search_ > pos_ ? close_search_ - pos_ : 0;
    pos_ = 0;
  }
  total_.append(out);
  return out;
}

ChatDelta ChatOutputParser::finish() {
  if (finished_) fail("ChatOutputParser", "finish() called twice");
  finished_ = true;
  ChatDelta out;
  advance(buf_.size(), true, out);
  buf_.clear();
  pos_ = 0;
  total_.append(out);
  return out;
}

void ChatOutputParser::advance(size_t end, bool final, ChatDelta& out) {
  while (step(end, final, out)) {
  }
}

bool ChatOutputParser::step(size_t end, bool final, ChatDelta& out) {
  const std::string_view text = std::string_view(buf_).substr(pos_, end - pos_);
  switch (state_) {
    case State::Start:
      return step_start(text, final);
    case State::ReasoningStart:  // the template writes "<think>\n"
      if (text.empty() && !final) return false;
      if (!text.empty() && text.front() == '\n') ++pos_;
      state_ = State::Reasoning;
      return true;
    case State::Reasoning:
      return step_reasoning(text, final, out);
    case State::AfterReasoning: {  // the template writes "</think>\n\n"
      if (!final && (text.empty() || text == "\n")) return false;
      const size_t newlines = text.starts_with("\n\n") ? 2 : text.starts_with("\n") ? 1 : 0;
      pos_ += newlines;
      state_ = State::Content;
      return true;
    }
    case State::Content:
      return step_content(text, final, out);
    case State::ToolCall:
      return step_tool_call(text, final, out);
  }
  return false;
}

bool ChatOutputParser::step_start(std::string_view text, bool final) {
  if (options_.starts_in_reasoning) {
    // The prompt ended with <think>; a model may still write its own.
    if (text.starts_with(kThinkOpen)) {
      pos_ += kThinkOpen.size();
      state_ = State::ReasoningStart;
      return true;
    }
    if (!final && kThinkOpen.starts_with(text)) return false;
    state_ = State::Reasoning;
    return true;
  }
  // Content, unless the model opens its reasoning itself (whitespace before
  // <think> goes with the tag). Whitespace beyond the memory bound decides.
  const size_t space = leading_space(text);
  if (space <= options_.max_held_bytes) {
    const std::string_view rest = text.substr(space);
    if (rest.starts_with(kThinkOpen)) {
      pos_ += space + kThinkOpen.size();
      state_ = State::ReasoningStart;
      return true;
    }
    if (!final && kThinkOpen.starts_with(rest)) return false;
  }
  state_ = State::Content;
  return true;
}

bool ChatOutputParser::step_reasoning(std::string_view text, bool final, ChatDelta& out) {
  if (const size_t close = text.find(kThinkClose); close != std::string_view::npos) {
    std::string_view reasoning = text.substr(0, close);
    if (reasoning.ends_with('\n')) reasoning.remove_suffix(1);  // the template writes "\n</think>"
    out.reasoning += reasoning;
    pos_ += close + kThinkClose.size();
    state_ = State::AfterReasoning;
    return true;
  }
  // Without </think> at the end, generation stopped while reasoning: it stays reasoning.
  size_t hold = 0;
  if (!final) {
    hold = partial_tag_at_end(text, kThinkClose);
    if (hold < text.size() && text[text.size() - 1 - hold] == '\n') ++hold;
  }
  out.reasoning += text.substr(0, text.size() - hold);
  pos_ += text.size() - hold;
  return false;
}

void ChatOutputParser::emit_content(std::string_view text, ChatDelta& out) {
  if (text.empty()) return;
  out.content += text;
  after_call_ = false;
}

bool ChatOutputParser::step_content(std::string_view text, bool final, ChatDelta& out) {
  const size_t max_space = options_.max_held_bytes;
  if (!calls_enabled_) {
    emit_content(text, out);
    pos_ += text.size();
    return false;
  }
  if (const size_t open = text.find(kCallOpen); open != std::string_view::npos) {
    // The template writes "\n\n" before the first call and "\n" between calls.
    const std::string_view before = text.substr(0, open);
    const size_t space = std::min(trailing_space(before), max_space);
    emit_content(before.substr(0, before.size() - space), out);
    trimmed_ws_ = before.substr(before.size() - space);
    pos_ += open;
    state_ = State::ToolCall;
    call_form_known_ = false;
    close_search_ = pos_ + kCallOpen.size();
    return true;
  }
  if (final) {
    // A model may end with a newline after its last call: not content.
    if (!(after_call_ && trailing_space(text) == text.size() && text.size() <= max_space)) emit_content(text, out);
    pos_ += text.size();
    return false;
  }
  // Hold back what a <tool_call> may still follow or complete.
  size_t hold = partial_tag_at_end(text, kCallOpen);
  hold += std::min(trailing_space(text.substr(0, text.size() - hold)), max_space);
  emit_content(text.substr(0, text.size() - hold), out);
  pos_ += text.size() - hold;
  return false;
}

bool ChatOutputParser::step_tool_call(std::string_view text, bool final, ChatDelta& out) {
  const size_t limit = options_.max_held_bytes;
  // Decided within the first `limit` bytes only, so that a call is judged the
  // same however the text arrives.
  const std::string_view window = text.substr(0, std::min(text.size(), limit));

  if (!call_form_known_ && window.size() > kCallOpen.size()) {
    // A call's body starts with <function= or {. Anything else is prose that
    // mentions the tag: the tag is content, and the text after it is read on.
    const std::string_view body = window.substr(kCallOpen.size());
    const std::string_view rest = body.substr(leading_space(body));
    if (rest.starts_with(kFunctionOpen) || rest.starts_with('{')) {
      call_form_known_ = true;
    } else if (!rest.empty() && !kFunctionOpen.starts_with(rest)) {
      emit_content(trimmed_ws_, out);
      emit_content(kCallOpen, out);
      trimmed_ws_.clear();
      pos_ += kCallOpen.size();
      state_ = State::Content;
      return true;
    }
  }

  const size_t close = call_form_known_ ? text.find(kCallClose, close_search_ - pos_) : std::string_view::npos;
  if (close != std::string_view::npos && close + kCallClose.size() <= limit) {
    const size_t call_end = close + kCallClose.size();
    ToolCall call;
    if (parse_call(text.substr(kCallOpen.size(), close - kCallOpen.size()), call)) {
      call.id = next_id();
      out.tool_calls.push_back(std::move(call));
      after_call_ = true;
    } else {
      emit_content(trimmed_ws_, out);
      emit_content(text.substr(0, call_end), out);
    }
    trimmed_ws_.clear();
    pos_ += call_end;
    state_ = State::Content;
    return true;
  }
  if (final || text.size() >= limit) {
    // Never closed, or too long to hold: not a call. It is content, and so
    // is the rest (a later </tool_call> could not be matched with its start).
    emit_content(trimmed_ws_, out);
    trimmed_ws_.clear();
    calls_enabled_ = false;
    state_ = State::Content;
    return true;
  }
  if (call_form_known_) {
    // A </tool_call> that the next chunk completes starts in the last bytes.
    const size_t searched = text.size() - std::min(text.size(), kCallClose.size() - 1);
    close_search_ = pos_ + std::max(kCallOpen.size(), searched);
  }
  return false;
}

bool ChatOutputParser::parse_call(std::string_view body, ToolCall& call) const {
  const std::string_view rest = body.substr(leading_space(body));
  if (rest.starts_with(kFunctionOpen)) return parse_xml_call(rest, call);
  return parse_json_call(rest, call);
}

// <function=NAME>
// <parameter=ARG>
// VALUE
// </parameter>
// ...
// </function>
// Lenient where models are known to slip: a missing </parameter> ends the
// value at the next <parameter= or </function>; a missing </function> is
// taken. Text between the parts that is not whitespace makes it malformed.
bool ChatOutputParser::parse_xml_call(std::string_view body, ToolCall& call) const {
  size_t p = kFunctionOpen.size();
  size_t close = body.find('>', p);
  if (close == std::string_view::npos) return false;
  const std::string_view name = trim(body.substr(p, close - p));
  if (name.empty() || name.find_first_of("<\n") != std::string_view::npos) return false;
  const auto tool = tools_.find(std::string(name));
  p = close + 1;

  ordered_json arguments = ordered_json::object();
  for (;;) {
    p += leading_space(body.substr(p));
    const std::string_view rest = body.substr(p);
    if (rest.empty()) break;
    if (rest.starts_with(kFunctionClose)) {
      if (trim(rest.substr(kFunctionClose.size())).empty()) break;
      return false;
    }
    if (!rest.starts_with(kParamOpen)) return false;
    p += kParamOpen.size();
    close = body.find('>', p);
    if (close == std::string_view::npos) return false;
    const std::string param(trim(body.substr(p, close - p)));
    if (param.empty()) return false;

    const size_t value_start = close + 1;
    const size_t value_end =
        std::min({body.find(kParamClose, value_start), body.find(kParamOpen, value_start),
                  body.find(kFunctionClose, value_start), body.size()});
    std::string_view value = body.substr(value_start, value_end - value_start);
    if (value.starts_with('\n')) value.remove_prefix(1);  // the template writes "\nVALUE\n"
    if (value.ends_with('\n')) value.remove_suffix(1);

    unsigned types = 0;
    if (tool != tools_.end())
      if (const auto t = tool->second.find(param); t != tool->second.end()) types = t->second;
    arguments[param] = typed_value(value, types);

    p = value_end;
    if (body.substr(p).starts_with(kParamClose)) p += kParamClose.size();
  }
  call.name = name;
  call.arguments = dump(arguments);
  return true;
}

// {"name": NAME, "arguments": {...}} (Qwen3, Hermes); "parameters" is taken
// for "arguments", and arguments given as a JSON string are read.
bool ChatOutputParser::parse_json_call(std::string_view body, ToolCall& call) const {
  const std::optional<ordered_json> j = parse_json(body);
  if (!j || !j->is_object()) return false;
  const auto name = j->find("name");
  if (name == j->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return false;
  auto arguments = j->find("arguments");
  if (arguments == j->end()) arguments = j->find("parameters");
  ordered_json args = ordered_json::object();
  if (arguments != j->end()) {
    if (arguments->is_string()) {
      std::optional<ordered_json> parsed = parse_json(arguments->get_ref<const std::string&>());
      if (!parsed || !parsed->is_object()) return false;
      args = *std::move(parsed);
    } else if (arguments->is_object()) {
      args = *arguments;
    } else {
      return false;
    }
  }
  call.name = name->get<std::string>();
  call.arguments = dump(args);
  return true;
}

std::string ChatOutputParser::next_id() {
  char id[32];
  std::snprintf(id, sizeof id, "call_%016llx",
                static_cast<unsigned long long>(mix(options_.id_seed + 0x2545F4914F6CDD1DULL * ++calls_)));
  return id;
}

ChatDelta parse_chat_output(std::string_view text, const ChatOutputParserOptions& options) {
  ChatOutputParser parser(options);
  parser.push(text);
  parser.finish();
  return parser.total();
}

}  // namespace deltagen
