// Fuzzes the Jinja engine (src/chat/jinja): parsing a template and rendering
// it. A chat template comes from a downloaded tokenizer_config.json, so it is
// untrusted input like the files the other targets read.
//
// The input is TEMPLATE, or TEMPLATE \0 CONTEXT_JSON: the part after the
// first NUL byte, when it is a JSON object, is the render's context; without
// one (or when it is not JSON) a small chat context is used, with messages,
// tools and tool calls, so that real chat templates take their real paths.
//
// Properties checked:
//   - parse and render throw nothing but deltagen::Error, with a one-line message;
//   - the output stays within max_output_bytes;
//   - a template that renders once renders the same again (nothing leaks
//     between renders), unless it reads the clock (strftime_now).
//
// The limits are lowered so that each input runs quickly; a template that
// runs into them is an accepted rejection like any other Error.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "chat/jinja/jinja.h"
#include "fuzz_util.h"

using namespace deltagen;

namespace {

const nlohmann::ordered_json& default_context() {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Weather in Paris? 你好 😀"},
      {"role": "assistant", "content": "<think>\nlook it up\n</think>\n\nChecking.",
       "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                       "arguments": {"city": "Paris", "days": 2, "hourly": true, "scale": 1.5, "tags": ["a"]}}}]},
      {"role": "tool", "content": "{\"temp\": 18}"},
      {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "and this?"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true,
    "enable_thinking": false,
    "bos_token": "<s>"
  })");
  return context;
}

jinja::Limits fuzz_limits() {
  jinja::Limits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_loop_iterations = 20000;
  return limits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  nlohmann::ordered_json context = default_context();
  if (nul != std::string_view::npos) {
    try {
      auto parsed = nlohmann::ordered_json::parse(input.substr(nul + 1));
      if (parsed.is_object()) context = std::move(parsed);
    } catch (const nlohmann::json::exception&) {
      // not JSON: keep the default context
    }
  }

  const jinja::Limits limits = fuzz_limits();
  std::optional<jinja::Template> t;
  if (!fuzz::expect_only_error("Template::parse", [&] { t = jinja::Template::parse(source, "fuzz.jinja", limits); }))
    return 0;
  std::string first, second;
  if (!fuzz::expect_only_error("Template::render", [&] { first = t->render(context); })) return 0;
  if (first.size() > limits.max_output_bytes) fuzz::finding("render returned more than max_output_bytes");
  if (source.find("strftime_now") != std::string_view::npos) return 0;
  if (!fuzz::expect_only_error("Template::render (again)", [&] { second = t->render(context); }))
    fuzz::finding("a template that rendered once failed the second time");
  if (first != second) fuzz::finding("two renders of the same template and context differ");
  return 0;
}
