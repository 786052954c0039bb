// A Jinja2 template engine for Hugging Face chat templates: renders
// tokenizer_config.json's chat_template byte for byte as transformers does
// (Python Jinja2 in an ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, the loopcontrols extension, and transformers' tojson,
// raise_exception and strftime_now).
//
//   auto t = jinja::Template::parse(source, "chat_template.jinja");
//   std::string prompt = t.render({{"messages", messages}, {"add_generation_prompt", true}});
//
// Templates are untrusted input: parsing and rendering are bounded (Limits)
// and have no access to files, the network or the environment. Every failure
// is a one-line deltagen::Error "NAME:LINE:COL: problem", including a
// template's own raise_exception('message').
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace deltagen::jinja {

struct Limits {
  size_t max_template_bytes = 1 << 20;
  // The rendered text, and any one string built while rendering. Everything
  // built in one render (strings, lists) may total 32 times this.
  size_t max_output_bytes = 8 << 20;
  // How deep things nest: an expression inside an expression, a block inside
  // a block, a macro call inside a macro call. Parsing refuses deeper
  // sources; rendering counts all three together (a macro that calls itself
  // forever stops here), so the C++ stack stays bounded.
  int max_depth = 128;
  // Work per render: loop iterations, macro calls, items walked by filters,
  // and text scanned (every 256 bytes compared, searched or measured count
  // one), all together. (range() itself stops at 100000 items, as Jinja's
  // sandbox does.) A 3 MB Qwen3.5 conversation needs under 1% of the default.
  int64_t max_loop_iterations = 1'000'000;
};

class Template {
 public:
  // name: shown in errors ("chat_template.jinja"). Throws Error
  // "NAME:LINE:COL: problem" for a syntax error or an unsupported construct.
  static Template parse(std::string_view source, std::string name, Limits limits = {});

  // context: the template's variables (messages, tools, add_generation_prompt,
  // any keyword arguments), key order kept as given. Thread-safe: renders
  // share nothing but the parsed template.
  std::string render(const nlohmann::ordered_json& context) const;

  const std::string& name() const;

 private:
  struct Parsed;
  explicit Template(std::shared_ptr<const Parsed> parsed) : parsed_(std::move(parsed)) {}
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace deltagen::jinja
