#include <nlohmann/json.hpp>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/jinja.h"
#include "chat/jinja/lexer.h"
#include "chat/jinja/parser.h"
#include "deltagen/error.h"

namespace deltagen::jinja {

struct Template::Parsed {
  std::string name;
  Limits limits;
  Body body;
};

Template Template::parse(std::string_view source, std::string name, Limits limits) {
  if (source.size() > limits.max_template_bytes)
    throw Error(name + ": template too large: " + std::to_string(source.size()) + " bytes, more than the " +
                std::to_string(limits.max_template_bytes) + " allowed");
  if (limits.max_depth < 1) limits.max_depth = 1;
  auto parsed = std::make_shared<Parsed>();
  parsed->name = std::move(name);
  parsed->limits = limits;
  parsed->body = Parser(tokenize(source, parsed->name), parsed->name, limits.max_depth).parse_template();
  return Template(std::move(parsed));
}

std::string Template::render(const nlohmann::ordered_json& context) const {
  Interpreter interpreter(parsed_->name, parsed_->limits);
  return interpreter.render(parsed_->body, context);
}

const std::string& Template::name() const { return parsed_->name; }

}  // namespace deltagen::jinja
