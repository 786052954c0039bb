// Filters on strings and numbers, with Jinja 3.1's signatures and quirks.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja/filters.h"
#include "chat/jinja/json_dump.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/problem.h"
#include "chat/jinja/pystr.h"

namespace deltagen::jinja::filters {
namespace {

// Python's int(str, base): optional sign, underscores between digits, spaces around.
std::optional<int64_t> parse_int(std::string_view s, int base) {
  s = pystr::strip(s, std::nullopt, true, true);
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.size() > 1 && s[0] == '0') {
    const char p = char(s[1] | 0x20);
    if ((base == 16 && p == 'x') || (base == 8 && p == 'o') || (base == 2 && p == 'b')) s.remove_prefix(2);
  }
  if (s.empty() || s.front() == '_' || s.back() == '_') return std::nullopt;
  uint64_t value = 0;
  char previous = 0;
  for (char c : s) {
    if (c == '_') {
      if (previous == '_') return std::nullopt;
      previous = c;
      continue;
    }
    const char l = char(c | 0x20);
    const int d = c >= '0' && c <= '9' ? c - '0' : l >= 'a' && l <= 'z' ? l - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (value > (uint64_t(INT64_MAX) - uint64_t(d)) / uint64_t(base)) problem("int: value too large for 64 bits");
    value = value * uint64_t(base) + uint64_t(d);
    previous = c;
  }
  return negative ? -int64_t(value) : int64_t(value);
}

// Python's float(str): decimal or exponent notation, inf, nan, spaces around.
std::optional<double> parse_float(std::string_view s) {
  s = pystr::strip(s, std::nullopt, true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_') {  // only between digits
      if (i == 0 || i + 1 == s.size() || !std::isdigit((unsigned char)s[i - 1]) ||
          !std::isdigit((unsigned char)s[i + 1]))
        return std::nullopt;
      continue;
    }
    if (!std::isalnum((unsigned char)c) && c != '.' && c != '+' && c != '-') return std::nullopt;
    clean += c;
  }
  if (clean.empty()) return std::nullopt;
  const std::string lower = pystr::lower(clean);
  const std::string bare = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
  if (bare == "inf" || bare == "infinity") return lower[0] == '-' ? -INFINITY : INFINITY;
  if (bare == "nan") return NAN;
  if (bare.find_first_of("xp") != std::string::npos) return std::nullopt;  // strtod reads hex; Python does not
  char* end = nullptr;
  const double v = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return v;
}

// round(x, ndigits) as Python: the decimal value of x rounded half to even.
double python_round(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits > 300) return x;
  if (ndigits < 0) {
    if (ndigits < -308) return std::copysign(0.0, x);
    const double scale = std::pow(10.0, double(-ndigits));
    const double y = x / scale;
    double r = std::nearbyint(y);  // ties to even under the default rounding mode
    return r * scale;
  }
  std::string buf(size_t(std::snprintf(nullptr, 0, "%.*f", int(ndigits), x)) + 1, '\0');
  std::snprintf(buf.data(), buf.size(), "%.*f", int(ndigits), x);
  return std::strtod(buf.c_str(), nullptr);
}

}  // namespace

Value abs(Interpreter&, const Value& v, const Args& args) {
  ArgReader a(args, "abs", {});
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) problem("integer overflow: the result does not fit in 64 bits");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  problem("bad operand type for abs(): '" + type_name(v) + "'");
}

Value capitalize(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "capitalize", {});
  const Value s = soft_str(in, v);
  return in.text(pystr::capitalize(s.str()), s.safe());
}

Value center(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "center", {"width"});
  const Value s = soft_str(in, v);
  const int64_t width = a.int_or(0, 80);
  const int64_t len = int64_t(pystr::length(s.str()));
  if (width <= len) return s;
  if (uint64_t(width) > in.max_string_bytes()) problem("center: width too large");
  const int64_t margin = width - len;
  const int64_t left = margin / 2 + (margin & width & 1);  // CPython's str.center
  return in.text(std::string(size_t(left), ' ') + s.str() + std::string(size_t(margin - left), ' '), s.safe());
}

Value default_value(Interpreter&, const Value& v, const Args& args) {
  ArgReader a(args, "default", {"default_value", "boolean"});
  const bool use_default = v.is_undefined() || (a.bool_or(1, false) && !truthy(v));
  return use_default ? a.get_or(0, Value(std::string())) : v;
}

Value escape(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "escape", {});
  if (v.is_string() && v.safe()) return v;
  return in.text(html_escape(in.str(v)), true);
}

Value forceescape(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "forceescape", {});
  return in.text(html_escape(in.str(v)), true);
}

Value to_float(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "float", {"default"});
  (void)in;
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string())
    if (auto f = parse_float(v.str())) return Value(*f);
  return a.get_or(0, Value(0.0));
}

// value|format(args): printf-style, like `value % args`.
Value format(Interpreter& in, const Value& v, const Args& args) {
  if (!args.positional.empty() && !args.keyword.empty()) problem("format: cannot mix positional and keyword arguments");
  Value operands;
  if (!args.keyword.empty()) {
    auto d = std::make_shared<Dict>();
    for (const auto& [k, item] : args.keyword) d->set(Value(k), item);
    operands = Value(std::shared_ptr<const Dict>(std::move(d)));
  } else {
    operands = in.list(args.positional, true);
  }
  return binary_operator(in, Op::Mod, soft_str(in, v), operands);
}

Value indent(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "indent", {"width", "first", "blank"});
  const Value s = soft_str(in, v);
  std::string indention;
  if (a.has(0) && a.get(0)->is_string()) {
    indention = a.get(0)->str();
  } else {
    const int64_t width = a.int_or(0, 4);
    if (width > 0 && uint64_t(width) > in.max_string_bytes()) problem("indent: width too large");
    indention.assign(size_t(std::max<int64_t>(width, 0)), ' ');
  }
  const std::vector<std::string> lines = pystr::splitlines(s.str() + "\n", false);
  in.step(int64_t(lines.size()) / 16);
  const uint64_t bound = s.str().size() + lines.size() * (indention.size() + 1) + indention.size();
  if (bound > in.max_string_bytes()) problem("indent: result too long");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (a.bool_or(2, false) || !lines[i].empty()) out += indention;
    }
    out += lines[i];
  }
  if (a.bool_or(1, false)) out = indention + out;
  return in.text(std::move(out), s.safe());
}

Value to_int(Interpreter&, const Value& v, const Args& args) {
  ArgReader a(args, "int", {"default", "base"});
  const int64_t base = a.int_or(1, 10);
  if (base != 0 && (base < 2 || base > 36)) problem("int() base must be >= 2 and <= 36, or 0");
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d)) problem("cannot convert float " + float_repr(d) + " to integer");
    if (std::fabs(d) >= 9.2e18) problem("int: value too large for 64 bits");
    return Value(int64_t(d));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), base == 0 ? 10 : int(base))) return Value(*i);
    // "42.23"|int is 42: Jinja retries through float.
    if (auto f = parse_float(v.str())) {
      if (!std::isfinite(*f)) problem("cannot convert float " + float_repr(*f) + " to integer");
      if (std::fabs(*f) >= 9.2e18) problem("int: value too large for 64 bits");
      return Value(int64_t(*f));
    }
  }
  return a.get_or(0, Value(int64_t(0)));
}

Value length(Interpreter&, const Value& v, const Args& args) {
  ArgReader a(args, "length", {});
  switch (v.kind()) {
    case Value::Kind::String:
      return Value(int64_t(pystr::length(v.str())));
    case Value::Kind::List:
      return Value(int64_t(v.list().size()));
    case Value::Kind::Dict:
      return Value(int64_t(v.dict().size()));
    case Value::Kind::Undefined:
      return Value(int64_t(0));
    case Value::Kind::Loop:
      return Value(int64_t(v.loop().items->size()));
    default:
      problem("object of type '" + type_name(v) + "' has no len()");
  }
}

Value lower(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "lower", {});
  const Value s = soft_str(in, v);
  return in.text(pystr::lower(s.str()), s.safe());
}

Value upper(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "upper", {});
  const Value s = soft_str(in, v);
  return in.text(pystr::upper(s.str()), s.safe());
}

Value replace(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "replace", {"old", "new", "count"});
  if (!a.has(0) || !a.has(1)) problem("replace() needs the old and the new text");
  const int64_t count = a.has(2) && !a.get(2)->is_none() ? a.int_or(2, -1) : -1;
  return in.text(pystr::replace(in.str(v), in.str(*a.get(0)), in.str(*a.get(1)), count, in.max_string_bytes()));
}

Value round(Interpreter&, const Value& v, const Args& args) {
  ArgReader a(args, "round", {"precision", "method"});
  const int64_t precision = a.int_or(0, 0);
  const std::string method = a.string_or(1, "common");
  if (method != "common" && method != "ceil" && method != "floor")
    problem("round: method must be common, ceil or floor");
  if (!v.is_number()) problem("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (!v.is_float()) {
      if (precision >= 0) return Value(v.as_int());
      return Value(int64_t(python_round(double(v.as_int()), precision)));
    }
    return Value(python_round(v.as_double(), precision));
  }
  const double scale = std::pow(10.0, double(precision));
  const double x = v.as_double() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value safe(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "safe", {});
  if (v.is_string()) return v.safe() ? v : in.text(v.str(), true);
  return in.text(in.str(v), true);
}

Value string(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "string", {});
  return soft_str(in, v);
}

// Jinja's title filter (not str.title): words start after - space ( { [ <.
Value title(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "title", {});
  const std::string s = in.str(v);
  auto separator = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || pystr::is_space(c);
  };
  std::string out;
  bool word_start = true;
  for (size_t i = 0; i < s.size();) {
    const size_t begin = i;
    const char32_t c = pystr::next(s, i);
    const std::string piece = s.substr(begin, i - begin);
    if (separator(c)) {
      out += piece;
      word_start = true;
    } else {
      out += word_start ? pystr::upper(piece) : pystr::lower(piece);
      word_start = false;
    }
  }
  return in.text(std::move(out));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value tojson(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions o;
  o.ensure_ascii = a.bool_or(0, false);
  if (a.has(1) && !a.get(1)->is_none()) {
    const Value& indent = *a.get(1);
    if (indent.is_string()) {
      o.indent = indent.str();
    } else {
      const int64_t n = a.int_or(1, 0);
      if (n > 1000) problem("tojson: indent too large");
      o.indent = std::string(size_t(std::max<int64_t>(n, 0)), ' ');
    }
  }
  if (a.has(2) && !a.get(2)->is_none()) {
    const Value& seps = *a.get(2);
    if (!seps.is_list() || seps.list().size() != 2 || !seps.list()[0].is_string() || !seps.list()[1].is_string())
      problem("tojson: separators must be a pair of strings");
    o.item_separator = seps.list()[0].str();
    o.key_separator = seps.list()[1].str();
  }
  o.sort_keys = a.bool_or(3, false);
  std::string json = to_json(v, o, in.max_string_bytes());
  in.step(int64_t(json.size()) / 256);
  return in.text(std::move(json));
}

Value trim(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "trim", {"chars"});
  const Value s = soft_str(in, v);
  const std::optional<std::string> chars = a.optional_string(0);
  const std::string_view stripped =
      pystr::strip(s.str(), chars ? std::optional<std::string_view>(*chars) : std::nullopt, true, true);
  if (stripped.size() == s.str().size()) return s;
  return in.text(std::string(stripped), s.safe());
}

Value truncate(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "truncate", {"length", "killwords", "end", "leeway"});
  const std::string s = in.str(v);
  const int64_t length = a.int_or(0, 255);
  const std::string end = a.string_or(2, "...");
  const int64_t leeway = a.has(3) && !a.get(3)->is_none() ? a.int_or(3, 5) : 5;
  const auto end_length = int64_t(pystr::length(end));
  if (length < end_length)
    problem("truncate: expected length >= " + std::to_string(end_length) + ", got " + std::to_string(length));
  if (leeway < 0) problem("truncate: expected leeway >= 0, got " + std::to_string(leeway));
  const std::vector<size_t> offsets = pystr::offsets(s);
  const auto size = int64_t(offsets.size() - 1);
  if (size <= length + leeway) return in.text(s);
  std::string head = s.substr(0, offsets[size_t(length - end_length)]);
  if (!a.bool_or(1, false)) {
    const size_t space = head.rfind(' ');
    if (space != std::string::npos) head.resize(space);
  }
  return in.text(head + end);
}

// len(re.findall(r"\w+", s)): word characters are letters, digits and '_';
// here every non-ASCII code point that is not whitespace or punctuation.
Value wordcount(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "wordcount", {});
  const std::string s = in.str(v);
  auto word_char = [](char32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (pystr::is_space(c) || !pystr::is_printable(c)) return false;
    const bool punctuation = (c >= 0xA1 && c <= 0xBF && c != 0xAA && c != 0xB2 && c != 0xB3 && c != 0xB5 && c != 0xB9 &&
                              c != 0xBA && c != 0xBC && c != 0xBD && c != 0xBE) ||
                             c == 0xD7 || c == 0xF7 || (c >= 0x2010 && c <= 0x2BFF) || (c >= 0x3000 && c <= 0x303F) ||
                             (c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) ||
                             (c >= 0xFE30 && c <= 0xFE4F);
    return !punctuation;
  };
  int64_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const bool w = word_char(pystr::next(s, i));
    if (w && !in_word) ++words;
    in_word = w;
  }
  return Value(words);
}

}  // namespace deltagen::jinja::filters
