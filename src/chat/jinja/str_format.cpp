// Python's str.format, as Jinja's sandbox runs it: replacement fields
// {} {0} {name} with .attr / [key] lookups (the sandbox's getattr, so a dict
// key works as an attribute), !s / !r conversions, and the format-spec
// mini-language ([[fill]align][sign][#][0][width][,|_][.precision][type]).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja/builtins.h"
#include "chat/jinja/problem.h"
#include "chat/jinja/pystr.h"

namespace deltagen::jinja {
namespace {

struct FormatSpec {
  std::string fill = " ";
  char align = 0, sign = '-', type = 0, grouping = 0;
  bool alternate = false;
  int64_t width = -1, precision = -1;
};

FormatSpec parse_spec(std::string_view spec) {
  FormatSpec f;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  size_t first_len = 0;
  if (!spec.empty()) {
    size_t j = 0;
    pystr::next(spec, j);
    first_len = j;
  }
  if (first_len < spec.size() && is_align(spec[first_len])) {
    f.fill = std::string(spec.substr(0, first_len));
    f.align = spec[first_len];
    i = first_len + 1;
  } else if (!spec.empty() && is_align(spec[0])) {
    f.align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) f.sign = spec[i++];
  if (i < spec.size() && spec[i] == '#') {
    f.alternate = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '0') {
    if (!f.align) {
      f.fill = "0";
      f.align = '=';
    }
    ++i;
  }
  auto number = [&] {
    int64_t n = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9')
      n = std::min<int64_t>(n * 10 + (spec[i++] - '0'), 1 << 20);
    return n;
  };
  if (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') f.width = number();
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) f.grouping = spec[i++];
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    if (i >= spec.size() || spec[i] < '0' || spec[i] > '9') problem("Format specifier missing precision");
    f.precision = std::min<int64_t>(number(), 200);
  }
  if (i < spec.size()) f.type = spec[i++];
  if (i != spec.size()) problem("Invalid format specifier '" + std::string(spec) + "'");
  return f;
}

std::string group_digits(std::string digits, char separator) {
  const size_t begin = digits.find_first_of("0123456789");
  size_t end = digits.find_first_not_of("0123456789", begin);
  if (begin == std::string::npos) return digits;
  if (end == std::string::npos) end = digits.size();
  for (ptrdiff_t k = ptrdiff_t(end) - 3; k > ptrdiff_t(begin); k -= 3) digits.insert(size_t(k), 1, separator);
  return digits;
}

std::string format_number(const Value& v, const FormatSpec& f) {
  char type = f.type;
  const bool is_float = v.is_float();
  if (!type) type = is_float ? 0 : 'd';
  std::string body;
  char buf[512];
  if (type == 'd' || type == 'n' || type == 'b' || type == 'o' || type == 'x' || type == 'X' || type == 'c') {
    if (is_float) problem(std::string("Unknown format code '") + type + "' for object of type 'float'");
    const int64_t n = v.as_int();
    if (type == 'c') {
      if (n < 0 || n > 0x10FFFF || (n >= 0xD800 && n <= 0xDFFF))
        problem("%c arg not in range(0x110000) or a surrogate (not representable as UTF-8)");
      pystr::append(body, char32_t(n));
      return body;
    }
    const uint64_t magnitude = n < 0 ? uint64_t(0) - uint64_t(n) : uint64_t(n);
    if (type == 'b') {
      for (uint64_t m = magnitude; m; m >>= 1) body.insert(body.begin(), char('0' + (m & 1)));
      if (body.empty()) body = "0";
    } else {
      std::snprintf(buf, sizeof buf,
                    type == 'o'   ? "%llo"
                    : type == 'x' ? "%llx"
                    : type == 'X' ? "%llX"
                                  : "%llu",
                    static_cast<unsigned long long>(magnitude));
      body = buf;
    }
    if (f.alternate && (type == 'b' || type == 'o' || type == 'x' || type == 'X'))
      body = std::string("0") + (type == 'X' ? 'X' : type) + body;
    if (n < 0) body = "-" + body;
  } else {
    const double d = v.as_double();
    const int precision = int(f.precision >= 0 ? f.precision : 6);
    if (!type) {
      if (f.precision < 0) {
        body = float_repr(d);
      } else {
        std::snprintf(buf, sizeof buf, "%.*g", std::max(precision, 1), d);
        body = buf;
        if (body.find_first_of(".en") == std::string::npos) body += ".0";
      }
    } else if (type == '%') {
      std::snprintf(buf, sizeof buf, "%.*f", precision, d * 100);
      body = std::string(buf) + "%";
    } else if (std::string_view("eEfFgG").find(type) != std::string_view::npos) {
      const std::string c_format = std::string("%") + (f.alternate ? "#" : "") + ".*" + type;
      std::snprintf(buf, sizeof buf, c_format.c_str(), precision, d);
      body = buf;
    } else {
      problem(std::string("Unknown format code '") + type + "' for object of type '" + type_name(v) + "'");
    }
  }
  if (f.grouping) body = group_digits(body, f.grouping);
  if (body[0] != '-' && (f.sign == '+' || f.sign == ' ')) body = std::string(1, f.sign) + body;
  return body;
}

std::string apply_spec(Interpreter& in, const Value& v, std::string_view spec) {
  if (spec.empty()) return in.str(v);
  const FormatSpec f = parse_spec(spec);
  std::string body;
  char default_align = '>';
  if (v.is_string()) {
    if (f.type && f.type != 's') problem(std::string("Unknown format code '") + f.type + "' for object of type 'str'");
    if (f.align == '=') problem("'=' alignment not allowed in string format specifier");
    body = v.str();
    if (f.precision >= 0 && int64_t(pystr::length(body)) > f.precision)
      body.resize(pystr::offsets(body)[size_t(f.precision)]);
    default_align = '<';
  } else if (v.is_number()) {
    body = format_number(v, f);
  } else {
    problem("unsupported format string passed to " + type_name(v) + ".__format__");
  }
  const auto len = int64_t(pystr::length(body));
  if (f.width <= len) return body;
  if (uint64_t(f.width) * f.fill.size() > in.max_string_bytes()) problem("format width too large");
  const int64_t margin = f.width - len;
  const char align = f.align ? f.align : default_align;
  int64_t left = align == '<' ? 0 : align == '^' ? margin / 2 : margin;
  std::string out;
  size_t sign_end = 0;
  if (align == '=' && !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) sign_end = 1;
  out += body.substr(0, sign_end);
  for (int64_t k = 0; k < left; ++k) out += f.fill;
  out += body.substr(sign_end);
  for (int64_t k = 0; k < margin - left; ++k) out += f.fill;
  return out;
}

// The value a field name selects: an argument, then .attr and [key] steps.
Value field_value(Interpreter& in, std::string_view field, const Args& args, size_t& next_auto, int& numbering) {
  size_t end = field.find_first_of(".[");
  const std::string_view head = field.substr(0, end);
  Value v;
  if (head.empty() || std::all_of(head.begin(), head.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    size_t index;
    if (head.empty()) {
      if (numbering == 2) problem("cannot switch from manual field specification to automatic field numbering");
      numbering = 1;
      index = next_auto++;
    } else {
      if (numbering == 1) problem("cannot switch from automatic field numbering to manual field specification");
      numbering = 2;
      if (head.size() > 9) problem("Too many decimal digits in format string");
      index = size_t(std::stoul(std::string(head)));
    }
    if (index >= args.positional.size())
      problem("Replacement index " + std::to_string(index) + " out of range for positional args tuple");
    v = args.positional[index];
  } else {
    auto it = std::find_if(args.keyword.begin(), args.keyword.end(), [&](const auto& kv) { return kv.first == head; });
    if (it == args.keyword.end()) problem("KeyError: '" + std::string(head) + "'");
    v = it->second;
  }
  while (end != std::string_view::npos && end < field.size()) {
    if (field[end] == '.') {
      const size_t next = field.find_first_of(".[", end + 1);
      v = in.attribute(v, field.substr(end + 1, next - end - 1));
      end = next;
    } else {
      const size_t close = field.find(']', end);
      if (close == std::string_view::npos) problem("Missing ']' in format string");
      const std::string key(field.substr(end + 1, close - end - 1));
      const bool digits = !key.empty() && key.size() < 18 && key.find_first_not_of("0123456789") == std::string::npos;
      v = in.item(v, digits ? Value(int64_t(std::stoll(key))) : Value(key));
      end = close + 1;
    }
  }
  return v;
}

}  // namespace

std::string format_fields(Interpreter& in, const std::string& format, const Args& args) {
  std::string out;
  size_t next_auto = 0;
  int numbering = 0;  // 1: automatic {}, 2: manual {0}
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      problem("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string::npos) problem("Single '{' encountered in format string");
    std::string_view field = std::string_view(format).substr(i + 1, close - i - 1);
    std::string_view spec;
    if (const size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    char conversion = 0;
    if (const size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size()) problem("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    Value v = field_value(in, field, args, next_auto, numbering);
    if (conversion == 'r' || conversion == 'a')
      v = in.text(repr(v, in.max_string_bytes()));
    else if (conversion == 's')
      v = in.text(in.str(v));
    else if (conversion)
      problem(std::string("Unknown conversion specifier ") + conversion);
    const std::string piece = apply_spec(in, v, spec);
    if (out.size() + piece.size() > in.max_string_bytes()) problem("format: result too long");
    out += piece;
    i = close;
  }
  return out;
}

}  // namespace deltagen::jinja
