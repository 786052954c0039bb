// A chat model's generated text -> reasoning, content and tool calls: the
// inverse of the chat template's rendering of an assistant turn, as an
// OpenAI-compatible server (reasoning_content, content, tool_calls) and the
// chat CLI need it, streamed. Qwen3.5 renders an assistant turn as
//
//   <think>\nREASONING\n</think>\n\nCONTENT\n\n<tool_call>\n<function=NAME>\n
//   <parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>
//
// (calls separated by "\n"); Qwen3 and Hermes-style templates write a call as
// <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>. Both forms
// are read, each call by what follows its <tool_call>.
//
// What is stripped is exactly the formatting the template adds, so that
// rendering a parsed turn gives the text back: one "\n" after <think>, one
// before </think>, up to two after it; the whitespace before a <tool_call>.
// Whitespace at the very end after a tool call is dropped too.
//
// Malformed model output is never an error: a tool call that does not parse,
// or is still open when generation ends, is content, verbatim. Generation
// that ends inside the reasoning (no </think>) leaves it reasoning, as
// llama-server and vLLM do. <think> is recognised only at the start of the
// output (a </think> in content that no <think> opened stays content:
// starts_in_reasoning says where the output starts). <tool_call> is read only
// outside the reasoning, and only where <function= or { follows it (else it
// is prose, content); a call ends at its first </tool_call> (a parameter
// value cannot contain one).
//
// The XML form's values are text; the tools' JSON schemas type them (see
// typed_value in the .cpp): a string stays as written, integer/number,
// boolean (true/True), null (null/None), object and array are parsed, and a
// value that does not fit stays a string. Without a schema: JSON if it is
// JSON, else a string. Calls to tools not offered are returned all the same.
//
// Streaming: push() returns at once everything that is decided; it holds back
// only a tail that may still become markup (a prefix of a tag, the whitespace
// that a following <tool_call> would trim, a "\n" that may precede </think>),
// an incomplete UTF-8 sequence, and an open tool call until </tool_call>.
// However the text is chunked, the deltas add up to parse_chat_output of
// the whole text. A delta does not say where in its content a call stood
// (OpenAI's messages and deltas keep content and tool_calls apart too).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "deltagen/options.h"

namespace deltagen {

// A piece of the output: what became final in one push() or finish().
struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;  // complete calls only

  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  void append(const ChatDelta& more);
};

struct ChatOutputParserOptions {
  // The prompt ended inside <think> (Qwen3.5's generation prompt with
  // thinking on): the output is reasoning until </think>.
  bool starts_in_reasoning = false;
  // OpenAI tool definitions ([{type: function, function: {name, parameters}}];
  // a bare {name, parameters} is taken too). Their parameter schemas type the
  // XML form's values, which are text. Read in the constructor only; entries
  // of another shape are skipped.
  const nlohmann::ordered_json* tools = nullptr;
  // false: tool-call markup stays content.
  bool parse_tool_calls = true;
  // Tool call ids are derived from it and a counter (the server passes a
  // random seed; tests get reproducible ids).
  uint64_t id_seed = 0;
  // Memory bound: a tool call longer than this (from <tool_call> to the end
  // of </tool_call>) is not a call. It is content from its <tool_call> on, and
  // so is the rest of the output (no more calls are parsed). The same bound
  // applies to the whitespace held back before a possible <tool_call>: only
  // the last this-many bytes of it are trimmed.
  size_t max_held_bytes = size_t{1} << 20;
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(const ChatOutputParserOptions& options);

  // The generated text as it arrives, in any chunking (chunks may split tags
  // and UTF-8 sequences). Returns what became final.
  ChatDelta push(std::string_view text);
  // End of generation: everything still held back (an open tool call
  // becomes content). Later push() and finish() calls throw Error.
  ChatDelta finish();

  // Everything returned so far.
  const ChatDelta& total() const { return total_; }

 private:
  enum class State {
    Start,           // nothing decided yet: is there a <think> at the start?
    ReasoningStart,  // right after <think>: a "\n" to strip?
    Reasoning,       // until </think>
    AfterReasoning,  // right after </think>: up to two "\n" to strip
    Content,         // text and <tool_call>s
    ToolCall,        // inside <tool_call>, until </tool_call>
  };
  // Runs the state machine over buf_[pos_, end): `end` is what has arrived
  // (less an incomplete UTF-8 sequence), `final` says nothing more comes.
  void advance(size_t end, bool final, ChatDelta& out);
  // One step over `text` = buf_[pos_, end); false when it needs more text
  // to decide (or, when final, has consumed it all).
  bool step(size_t end, bool final, ChatDelta& out);
  bool step_start(std::string_view text, bool final);
  bool step_reasoning(std::string_view text, bool final, ChatDelta& out);
  bool step_content(std::string_view text, bool final, ChatDelta& out);
  bool step_tool_call(std::string_view text, bool final, ChatDelta& out);
  void emit_content(std::string_view text, ChatDelta& out);

  // The call's body (between the tags) as a ToolCall; false if malformed.
  bool parse_call(std::string_view body, ToolCall& call) const;
  bool parse_xml_call(std::string_view body, ToolCall& call) const;
  bool parse_json_call(std::string_view body, ToolCall& call) const;
  std::string next_id();

  using ParamTypes = std::unordered_map<std::string, unsigned>;  // parameter -> JSON types (bits)

  ChatOutputParserOptions options_;  // without tools (read in the constructor)
  std::unordered_map<std::string, ParamTypes> tools_;  // by tool name

  State state_;
  bool calls_enabled_;
  std::string buf_;  // text not yet consumed starts at pos_
  size_t pos_ = 0;
  std::string trimmed_ws_;   // whitespace trimmed before the open <tool_call>: content again if it fails
  bool call_form_known_ = false;  // the open call's body starts as a call does
  size_t close_search_ = 0;  // no </tool_call> starts in the open call before here
  bool after_call_ = false;  // a tool call, and no content since
  bool finished_ = false;
  uint64_t calls_ = 0;
  ChatDelta total_;
};

// The whole output at once: push(text) then finish().
ChatDelta parse_chat_output(std::string_view text, const ChatOutputParserOptions& options);

}  // namespace deltagen
