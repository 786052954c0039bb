#include "chat/jinja/lexer.h"

#include <algorithm>
#include <cstdlib>

#include "chat/jinja/pystr.h"
#include "tokenizer/utf8.h"
#include "deltagen/error.h"

namespace deltagen::jinja {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Jinja's lexer first turns \r\n and \r into \n and drops one final newline
// (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& name) : src_(normalize_newlines(source)), name_(name) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    if (auto bad = tok::find_invalid_utf8(src_)) fail(*bad, "invalid UTF-8");
    while (pos_ < src_.size()) lex_root();
    Token end{TokenKind::End, {}};
    locate(src_.size(), end);
    out_.push_back(std::move(end));
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& problem) {
    Token t{TokenKind::End, {}};
    locate(at, t);
    throw Error(name_ + ":" + std::to_string(t.line) + ":" + std::to_string(t.column) + ": " + problem);
  }

  // Line and column of byte `at`. Tokens come in order, so the column is
  // counted on from the previous token's (one long line stays linear).
  void locate(size_t at, Token& t) {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), at) - 1;
    const size_t line_start = *it;
    if (line_start != cursor_line_start_ || at < cursor_) {
      cursor_line_start_ = line_start;
      cursor_ = line_start;
      cursor_column_ = 1;
    }
    cursor_column_ += int64_t(pystr::length(std::string_view(src_).substr(cursor_, at - cursor_)));
    cursor_ = at;
    t.line = int(it - line_starts_.begin()) + 1;
    t.column = int(cursor_column_);
  }

  void emit(TokenKind kind, size_t at, std::string text) {
    Token t{kind, std::move(text)};
    locate(at, t);
    out_.push_back(std::move(t));
  }

  bool starts(size_t at, std::string_view s) const { return std::string_view(src_).substr(at, s.size()) == s; }

  size_t skip_space(size_t at) const {
    while (at < src_.size()) {
      size_t i = at;
      if (!pystr::is_space(pystr::next(src_, i))) break;
      at = i;
    }
    return at;
  }

  // Text up to the next tag, stripped as the tag's markers and lstrip_blocks
  // say, then the tag.
  void lex_root() {
    size_t at = pos_;
    while ((at = src_.find('{', at)) != std::string::npos) {
      if (at + 1 < src_.size() && (src_[at + 1] == '{' || src_[at + 1] == '%' || src_[at + 1] == '#')) break;
      ++at;
    }
    if (at == std::string::npos) {
      emit(TokenKind::Text, pos_, src_.substr(pos_));
      pos_ = src_.size();
      return;
    }
    const char tag = src_[at + 1];
    const char sign = at + 2 < src_.size() && (src_[at + 2] == '-' || src_[at + 2] == '+') ? src_[at + 2] : 0;
    std::string_view text = std::string_view(src_).substr(pos_, at - pos_);
    text = strip_before_tag(text, sign, tag != '{');
    if (!text.empty()) emit(TokenKind::Text, pos_, std::string(text));
    const size_t inner = at + 2 + (sign ? 1 : 0);
    if (tag == '#') return lex_comment(at, inner);
    if (tag == '%' && lex_raw(at, inner)) return;
    lex_tag(at, inner, tag == '%');
  }

  std::string_view strip_before_tag(std::string_view text, char sign, bool lstrip_applies) const {
    if (sign == '-') return pystr::strip(text, std::nullopt, false, true);
    if (sign == '+' || !lstrip_applies) return text;
    const size_t line_begin = text.rfind('\n') + 1;  // npos + 1 == 0
    if (line_begin == 0 && !line_starting_) return text;
    const std::string_view tail = text.substr(line_begin);
    if (!tail.empty() && pystr::strip(tail, std::nullopt, true, false).empty()) return text.substr(0, line_begin);
    return text;
  }

  // After a block or comment end: "-" strips all whitespace, "+" keeps it,
  // else trim_blocks drops one newline.
  void finish_tag(size_t after, char sign, bool trims) {
    if (sign == '-')
      after = skip_space(after);
    else if (sign != '+' && trims && after < src_.size() && src_[after] == '\n')
      ++after;
    line_starting_ = after > 0 && src_[after - 1] == '\n';
    pos_ = after;
  }

  void lex_comment(size_t begin, size_t inner) {
    const size_t close = src_.find("#}", inner);
    if (close == std::string::npos) fail(begin, "unclosed comment: no '#}' after this '{#'");
    const char sign = close > inner && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    finish_tag(close + 2, sign, true);
  }

  // {% raw %}...{% endraw %}: the body is text, tags in it are not read.
  // Returns false when the tag at `begin` is not `raw`.
  bool lex_raw(size_t begin, size_t inner) {
    size_t after_open;
    if (!match_word_tag(inner, "raw", after_open, nullptr)) return false;
    if (src_[after_open - 3] == '-') after_open = skip_space(after_open);
    for (size_t at = src_.find("{%", after_open); at != std::string::npos; at = src_.find("{%", at + 2)) {
      const char sign = at + 2 < src_.size() && (src_[at + 2] == '-' || src_[at + 2] == '+') ? src_[at + 2] : 0;
      size_t after_close;
      char close_sign = 0;
      if (!match_word_tag(at + 2 + (sign ? 1 : 0), "endraw", after_close, &close_sign)) continue;
      line_starting_ = src_[after_open - 1] == '\n';
      const std::string_view body =
          strip_before_tag(std::string_view(src_).substr(after_open, at - after_open), sign, true);
      if (!body.empty()) emit(TokenKind::Text, after_open, std::string(body));
      finish_tag(after_close, close_sign, true);
      return true;
    }
    fail(begin, "unclosed raw block: no '{% endraw %}'");
  }

  // At `at`: whitespace, `word`, whitespace, optional "-" or "+", "%}".
  // Sets `after` past the "%}" and `sign` to the marker.
  bool match_word_tag(size_t at, std::string_view word, size_t& after, char* sign) const {
    at = skip_space(at);
    if (!starts(at, word) || (at + word.size() < src_.size() && is_name_char(src_[at + word.size()]))) return false;
    at = skip_space(at + word.size());
    char s = 0;
    if (at < src_.size() && (src_[at] == '-' || src_[at] == '+')) s = src_[at++];
    if (!starts(at, "%}") || (s == '+' && !sign)) return false;  // raw's opening tag has no "+%}"
    if (sign) *sign = s;
    after = at + 2;
    return true;
  }

  void lex_tag(size_t begin, size_t inner, bool block) {
    emit(block ? TokenKind::BlockBegin : TokenKind::PrintBegin, begin, {});
    size_t at = inner;
    int open_brackets = 0;
    while (true) {
      at = skip_space(at);
      if (at >= src_.size())
        fail(begin, block ? "unclosed tag: no '%}' after this '{%'" : "unclosed tag: no '}}' after this '{{'");
      if (open_brackets == 0) {
        const std::string_view close = block ? "%}" : "}}";
        char sign = 0;
        size_t end_at = at;
        if ((src_[at] == '-' || (block && src_[at] == '+')) && starts(at + 1, close)) sign = src_[end_at++];
        if (starts(end_at, close)) {
          emit(block ? TokenKind::BlockEnd : TokenKind::PrintEnd, at, {});
          finish_tag(end_at + 2, sign, block);
          return;
        }
      }
      const char c = src_[at];
      if (is_digit(c)) {
        at = lex_number(at);
      } else if (is_name_start(c)) {
        size_t end = at;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        emit(TokenKind::Name, at, src_.substr(at, end - at));
        at = end;
      } else if (c == '\'' || c == '"') {
        at = lex_string(at);
      } else {
        at = lex_operator(at, open_brackets);
      }
    }
  }

  size_t lex_operator(size_t at, int& open_brackets) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwo) {
      if (starts(at, op)) {
        emit(TokenKind::Operator, at, std::string(op));
        return at + 2;
      }
    }
    const char c = src_[at];
    if (std::string_view("+-/*%~<>=()[]{},.:|;").find(c) == std::string_view::npos) {
      size_t end = at;
      pystr::next(src_, end);
      fail(at, "unexpected character '" + src_.substr(at, end - at) + "' in a tag");
    }
    if (c == '(' || c == '[' || c == '{') ++open_brackets;
    if ((c == ')' || c == ']' || c == '}') && open_brackets > 0) --open_brackets;
    emit(TokenKind::Operator, at, std::string(1, c));
    return at + 1;
  }

  // Digits with single underscores between them (Jinja's (\d+_)*\d+); npos if none.
  size_t digits(size_t at) const {
    if (at >= src_.size() || !is_digit(src_[at])) return std::string::npos;
    while (true) {
      while (at < src_.size() && is_digit(src_[at])) ++at;
      if (at + 1 < src_.size() && src_[at] == '_' && is_digit(src_[at + 1])) {
        ++at;
        continue;
      }
      return at;
    }
  }

  size_t exponent(size_t at) const {
    if (at >= src_.size() || (src_[at] != 'e' && src_[at] != 'E')) return std::string::npos;
    ++at;
    if (at < src_.size() && (src_[at] == '+' || src_[at] == '-')) ++at;
    return digits(at);
  }

  size_t lex_number(size_t at) {
    const size_t whole = digits(at);
    // A float may not follow a dot: foo.0.1 is foo[0][1].
    const bool after_dot = at > 0 && src_[at - 1] == '.';
    size_t end = std::string::npos;
    if (!after_dot) {
      if (whole < src_.size() && src_[whole] == '.') {
        const size_t frac = digits(whole + 1);
        if (frac != std::string::npos) {
          const size_t e = exponent(frac);
          end = e != std::string::npos ? e : frac;
        }
      } else {
        end = exponent(whole);
      }
    }
    if (end != std::string::npos) {
      std::string literal;
      for (size_t i = at; i < end; ++i)
        if (src_[i] != '_') literal += src_[i];
      emit(TokenKind::Float, at, src_.substr(at, end - at));
      out_.back().float_value = std::strtod(literal.c_str(), nullptr);
      return end;
    }
    return lex_integer(at);
  }

  size_t lex_integer(size_t at) {
    int base = 10;
    size_t i = at;
    if (src_[at] == '0' && at + 1 < src_.size()) {
      const char p = char(src_[at + 1] | 0x20);
      base = p == 'b' ? 2 : p == 'o' ? 8 : p == 'x' ? 16 : 10;
      if (base != 10) i += 2;
    }
    auto digit_value = [](char c) {
      if (is_digit(c)) return c - '0';
      c = char(c | 0x20);
      return c >= 'a' && c <= 'f' ? c - 'a' + 10 : 99;
    };
    uint64_t value = 0;
    bool any = false, overflow = false;
    const bool leading_zero = base == 10 && src_[at] == '0';
    while (i < src_.size()) {
      if (src_[i] == '_' && i + 1 < src_.size() && digit_value(src_[i + 1]) < base && (any || base != 10)) {
        ++i;
        continue;
      }
      const int d = digit_value(src_[i]);
      if (d >= base || (leading_zero && d != 0)) break;
      overflow |= value > (uint64_t(INT64_MAX) - uint64_t(d)) / uint64_t(base);
      value = value * uint64_t(base) + uint64_t(d);
      any = true;
      ++i;
    }
    if (!any) fail(at, "malformed number");
    if (overflow) fail(at, "integer literal too large (more than 64 bits)");
    emit(TokenKind::Int, at, src_.substr(at, i - at));
    out_.back().int_value = int64_t(value);
    return i;
  }

  size_t lex_string(size_t begin) {
    const char quote = src_[begin];
    std::string value;
    size_t i = begin + 1;
    while (true) {
      if (i >= src_.size()) fail(begin, "unclosed string literal");
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i;
        continue;
      }
      i = decode_escape(i, value);
    }
    emit(TokenKind::String, begin, std::move(value));
    return i + 1;
  }

  // Python's unicode-escape codec, which Jinja applies to string literals.
  size_t decode_escape(size_t at, std::string& value) {
    if (at + 1 >= src_.size()) fail(at, "unclosed string literal");
    const char e = src_[at + 1];
    switch (e) {
      case '\n':
        return at + 2;  // a backslash-newline continues the line
      case '\\':
        value += '\\';
        return at + 2;
      case '\'':
        value += '\'';
        return at + 2;
      case '"':
        value += '"';
        return at + 2;
      case 'a':
        value += '\a';
        return at + 2;
      case 'b':
        value += '\b';
        return at + 2;
      case 'f':
        value += '\f';
        return at + 2;
      case 'n':
        value += '\n';
        return at + 2;
      case 'r':
        value += '\r';
        return at + 2;
      case 't':
        value += '\t';
        return at + 2;
      case 'v':
        value += '\v';
        return at + 2;
      case 'x':
        return hex_escape(at, 2, value);
      case 'u':
        return hex_escape(at, 4, value);
      case 'U':
        return hex_escape(at, 8, value);
      case 'N':
        fail(at, "\\N{...} escapes are not supported");
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      char32_t cp = 0;
      size_t i = at + 1;
      for (int n = 0; n < 3 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++n, ++i)
        cp = cp * 8 + char32_t(src_[i] - '0');
      pystr::append(value, cp);
      return i;
    }
    if (static_cast<unsigned char>(e) >= 0x80) {
      // Jinja escapes non-ASCII text as \xNN / \uNNNN before decoding, so a
      // backslash before it reads as an escaped backslash plus that spelling.
      size_t i = at + 1;
      const char32_t cp = pystr::next(src_, i);
      char buf[16];
      std::snprintf(buf, sizeof buf, cp <= 0xFF ? "\\x%02x" : cp <= 0xFFFF ? "\\u%04x" : "\\U%08x", unsigned(cp));
      value += buf;
      return i;
    }
    value += '\\';  // an unknown escape keeps its backslash
    value += e;
    return at + 2;
  }

  size_t hex_escape(size_t at, int count, std::string& value) {
    char32_t cp = 0;
    for (int k = 0; k < count; ++k) {
      const size_t i = at + 2 + size_t(k);
      const char c = i < src_.size() ? char(src_[i] | 0x20) : 0;
      const int d = is_digit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) fail(at, "truncated \\" + std::string(1, src_[at + 1]) + " escape");
      cp = cp * 16 + char32_t(d);
    }
    if (cp > 0x10FFFF) fail(at, "illegal Unicode character in escape");
    if (cp >= 0xD800 && cp <= 0xDFFF) fail(at, "surrogate code point in escape (not representable as UTF-8)");
    pystr::append(value, cp);
    return at + 2 + size_t(count);
  }

  const std::string src_;
  const std::string& name_;
  std::vector<size_t> line_starts_;
  size_t pos_ = 0;
  bool line_starting_ = true;                  // the previous tag ended with a newline (lstrip_blocks needs it)
  size_t cursor_ = 0, cursor_line_start_ = 0;  // locate()'s last position
  int64_t cursor_column_ = 1;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const std::string& name) { return Lexer(source, name).run(); }

}  // namespace deltagen::jinja
