// Splits a template into text and the tokens inside {{ }} and {% %}, the way
// Jinja's lexer does under the settings transformers renders chat templates
// with: trim_blocks (a newline right after a block or comment tag is
// dropped), lstrip_blocks (spaces and tabs before a block or comment tag on
// its own line are dropped), keep_trailing_newline off (one final newline
// of the source is dropped), and the "-" / "+" markers that strip or keep
// whitespace next to a tag. Comments disappear here; {% raw %} becomes text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deltagen::jinja {

enum class TokenKind {
  Text,        // template text between tags
  PrintBegin,  // {{
  PrintEnd,    // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,        // identifiers and keywords
  String,      // a string literal, escapes decoded
  Int,
  Float,
  Operator,  // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  End,       // end of the template
};

struct Token {
  TokenKind kind;
  std::string text;  // Text, Name, String (decoded), Operator; the literal for Int and Float
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1, column = 1;  // 1-based; columns count code points
};

// Throws deltagen::Error "NAME:LINE:COL: problem" for an unclosed tag,
// comment or string, a bad escape, an unknown character, or invalid UTF-8.
std::vector<Token> tokenize(std::string_view source, const std::string& name);

}  // namespace deltagen::jinja
