// Fuzzes the chat output parser (chat/output_parser) on arbitrary generated
// text. Its contract is stronger than the other parsers': malformed model
// output is never an error, so any exception at all is a finding.
//
// The first input byte picks the options (thinking, tool parsing, a small
// memory bound), the second seeds the chunking; the rest is the text.
// Properties checked:
//   - parsing the whole text, and streaming it in chunks of 1-16 bytes, give
//     the same reasoning, content and calls, and total() agrees;
//   - reasoning and content are pieces of the text: together no longer;
//   - every call has a name, an id, and arguments that are a JSON object.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "fuzz_util.h"

using namespace deltagen;

namespace {

const nlohmann::ordered_json& tools() {
  static const nlohmann::ordered_json t = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
      "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
      "o": {"type": "object"}, "a": {"type": "array"}, "u": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}}}
  ])");
  return t;
}

void check_same(const ChatDelta& a, const ChatDelta& b, const char* what) {
  if (a.reasoning != b.reasoning) fuzz::finding(std::string(what) + ": reasoning differs");
  if (a.content != b.content) fuzz::finding(std::string(what) + ": content differs");
  if (a.tool_calls.size() != b.tool_calls.size()) fuzz::finding(std::string(what) + ": tool call count differs");
  for (size_t i = 0; i < a.tool_calls.size(); ++i)
    if (a.tool_calls[i].id != b.tool_calls[i].id || a.tool_calls[i].name != b.tool_calls[i].name ||
        a.tool_calls[i].arguments != b.tool_calls[i].arguments)
      fuzz::finding(std::string(what) + ": tool call " + std::to_string(i) + " differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  ChatOutputParserOptions options;
  options.starts_in_reasoning = data[0] & 1;
  options.parse_tool_calls = !(data[0] & 2);
  options.tools = (data[0] & 4) ? &tools() : nullptr;
  if (data[0] & 8) options.max_held_bytes = 16 + (data[0] >> 4) * 8;
  uint32_t rng = data[1] * 2654435761u + 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  try {
    const ChatDelta whole = parse_chat_output(text, options);
    if (whole.reasoning.size() + whole.content.size() > text.size())
      fuzz::finding("reasoning and content are longer than the text");
    for (const ToolCall& call : whole.tool_calls) {
      if (call.name.empty() || call.id.empty()) fuzz::finding("a tool call without a name or an id");
      const auto arguments = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
      if (!arguments.is_object()) fuzz::finding("arguments are not a JSON object: " + call.arguments);
    }

    ChatOutputParser parser(options);
    ChatDelta streamed;
    for (size_t from = 0; from < text.size();) {
      rng = rng * 1664525u + 1013904223u;
      const size_t chunk = 1 + (rng >> 28);
      streamed.append(parser.push(text.substr(from, chunk)));
      from += chunk;
    }
    streamed.append(parser.finish());
    check_same(streamed, whole, "streamed vs whole");
    check_same(parser.total(), whole, "total() vs whole");
  } catch (const std::exception& e) {
    fuzz::finding(std::string("threw: ") + e.what());
  }
  return 0;
}
