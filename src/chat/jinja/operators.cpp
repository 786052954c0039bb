#include "chat/jinja/operators.h"

#include <cmath>
#include <cstdio>

#include "chat/jinja/problem.h"
#include "chat/jinja/pystr.h"
#include "chat/jinja/work.h"

namespace deltagen::jinja {

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

const char* symbol(Op op) {
  switch (op) {
    case Op::Add:
      return "+";
    case Op::Sub:
      return "-";
    case Op::Mul:
      return "*";
    case Op::Div:
      return "/";
    case Op::FloorDiv:
      return "//";
    case Op::Mod:
      return "%";
    case Op::Pow:
      return "** or pow()";
    default:
      return "?";
  }
}

[[noreturn]] void unsupported(Op op, const Value& a, const Value& b) {
  problem(std::string("unsupported operand type(s) for ") + symbol(op) + ": '" + type_name(a) + "' and '" +
          type_name(b) + "'");
}

void check_overflow(bool overflowed) {
  if (overflowed) problem("integer overflow: the result does not fit in 64 bits");
}

int64_t int_pow(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
    exponent >>= 1;
    if (exponent) check_overflow(__builtin_mul_overflow(base, base, &base));
  }
  return result;
}

Value arithmetic(Op op, const Value& a, const Value& b) {
  const bool ints = !a.is_float() && !b.is_float();
  if (ints) {
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    switch (op) {
      case Op::Add:
        check_overflow(__builtin_add_overflow(x, y, &r));
        return Value(r);
      case Op::Sub:
        check_overflow(__builtin_sub_overflow(x, y, &r));
        return Value(r);
      case Op::Mul:
        check_overflow(__builtin_mul_overflow(x, y, &r));
        return Value(r);
      case Op::Div:
        if (y == 0) problem("division by zero");
        return Value(double(x) / double(y));
      case Op::FloorDiv:
      case Op::Mod: {
        if (y == 0) problem("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) problem("integer overflow: the result does not fit in 64 bits");
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors toward -infinity
          --q;
          m += y;
        }
        return Value(op == Op::FloorDiv ? q : m);
      }
      case Op::Pow:
        if (y < 0) {
          if (x == 0) problem("0.0 cannot be raised to a negative power");
          return Value(std::pow(double(x), double(y)));
        }
        return Value(int_pow(x, y));
      default:
        break;
    }
  }
  const double x = a.as_double(), y = b.as_double();
  switch (op) {
    case Op::Add:
      return Value(x + y);
    case Op::Sub:
      return Value(x - y);
    case Op::Mul:
      return Value(x * y);
    case Op::Div:
      if (y == 0) problem("float division by zero");
      return Value(x / y);
    case Op::FloorDiv:
    case Op::Mod: {
      if (y == 0) problem(op == Op::Mod ? "float modulo" : "float floor division by zero");
      // CPython's float divmod.
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      if (op == Op::Mod) return Value(mod);
      double floordiv = std::copysign(0.0, x / y);
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      }
      return Value(floordiv);
    }
    case Op::Pow:
      if (x == 0 && y < 0) problem("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y))
        problem("negative number cannot be raised to a fractional power (complex result)");
      return Value(std::pow(x, y));
    default:
      break;
  }
  unsupported(op, a, b);
}

Value repeat(Interpreter& in, const Value& seq, const Value& times) {
  // An empty sequence repeats to nothing however large n is (the loops below
  // would still run n times).
  const bool empty = seq.is_string() ? seq.str().empty() : seq.list().empty();
  const int64_t n = empty ? 0 : std::max<int64_t>(times.as_int(), 0);
  if (seq.is_string()) {
    if (n > 0 && seq.str().size() > in.max_string_bytes() / uint64_t(n))
      problem("string too long: repeating it " + std::to_string(n) + " times passes the output limit");
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return in.text(std::move(out), seq.safe());
  }
  const List& items = seq.list();
  if (n > 0 && items.size() > in.max_string_bytes() / 8 / uint64_t(n))
    problem("list too long: repeating it " + std::to_string(n) + " times");
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  in.step(int64_t(out.size()) / 16);
  return in.list(std::move(out), seq.is_tuple());
}

std::string escaped_text(Interpreter& in, const Value& v) {
  if (v.is_string() && v.safe()) return v.str();
  return html_escape(in.str(v));
}

// Python's printf-style str % args.
Value format_percent(Interpreter& in, const Value& format, const Value& args);

}  // namespace

Value binary_operator(Interpreter& in, Op op, const Value& a, const Value& b) {
  if (op == Op::Concat) return in.text(in.str(a) + in.str(b));
  if (a.is_undefined()) problem(a.undefined_message());
  if (b.is_undefined()) problem(b.undefined_message());
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == Op::Add) {
    if (a.is_string() && b.is_string()) {
      if (a.safe() || b.safe()) return in.text(escaped_text(in, a) + escaped_text(in, b), true);
      if (a.str().size() + b.str().size() > in.max_string_bytes())
        problem("string too long: more than the output limit");
      return in.text(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      List out = a.list();
      out.insert(out.end(), b.list().begin(), b.list().end());
      in.step(int64_t(out.size()) / 16);
      return in.list(std::move(out), a.is_tuple());
    }
  }
  if (op == Op::Mul) {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(in, a, b);
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(in, b, a);
  }
  if (op == Op::Mod && a.is_string()) return format_percent(in, a, b);
  if (op == Op::Add && (a.is_string() || a.is_list()))  // Python's wording for these
    problem("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
  unsupported(op, a, b);
}

Value unary_operator(Op op, const Value& v) {
  if (v.is_undefined()) problem(v.undefined_message());
  if (!v.is_number())
    problem(std::string("bad operand type for unary ") + (op == Op::Neg ? "-" : "+") + ": '" + type_name(v) + "'");
  if (op == Op::Pos) return v.is_float() ? v : Value(v.as_int());
  if (v.is_float()) return Value(-v.as_double());
  if (v.as_int() == INT64_MIN) problem("integer overflow: the result does not fit in 64 bits");
  return Value(-v.as_int());
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::String:
      if (!item.is_string()) problem("'in <string>' requires string as left operand, not " + type_name(item));
      charge_scan(container.str().size());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : container.list())
        if (equals(v, item)) return true;
      return false;
    case Value::Kind::Dict:
      require_hashable(item);
      return container.dict().find(item) != nullptr;
    case Value::Kind::Undefined:
      return false;  // iterates as empty
    default:
      problem("argument of type '" + type_name(container) + "' is not iterable");
  }
}

namespace {

// One conversion: %[(key)][flags][width][.precision]type.
struct Spec {
  std::string key, flags;
  int width = -1, precision = -1;
  char type = 's';
};

std::string pad(std::string text, const Spec& spec) {
  const int64_t len = int64_t(pystr::length(text));
  if (spec.width <= len) return text;
  const std::string fill(size_t(spec.width - len), ' ');
  return spec.flags.find('-') != std::string::npos ? text + fill : fill + text;
}

std::string format_one(Interpreter& in, const Spec& spec, const Value& v) {
  char buf[512];
  std::string printf_spec = "%" + spec.flags;
  if (spec.width >= 0) printf_spec += std::to_string(std::min(spec.width, 400));
  if (spec.precision >= 0) printf_spec += "." + std::to_string(std::min(spec.precision, 100));
  switch (spec.type) {
    case 's':
    case 'r':
    case 'a': {
      std::string text = spec.type == 's' ? in.str(v) : repr(v, in.max_string_bytes());
      if (spec.precision >= 0 && int64_t(pystr::length(text)) > spec.precision)
        text = text.substr(0, pystr::offsets(text)[size_t(spec.precision)]);
      return pad(std::move(text), spec);
    }
    case 'c': {
      if (v.is_string() && pystr::length(v.str()) == 1) return pad(v.str(), spec);
      if (!v.is_int() || v.as_int() < 0 || v.as_int() > 0x10FFFF || (v.as_int() >= 0xD800 && v.as_int() <= 0xDFFF))
        problem("%c requires an int naming a character (not a surrogate) or a single character");
      std::string c;
      pystr::append(c, char32_t(v.as_int()));
      return pad(c, spec);
    }
    default:
      break;
  }
  if (!v.is_number()) problem(std::string("%") + spec.type + " format: a real number is required, not " + type_name(v));
  switch (spec.type) {
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
      const double d = v.as_double();
      if (v.is_float() && !std::isfinite(d)) problem("cannot convert float to integer");
      if (v.is_float() && std::fabs(d) >= 9.2e18) problem("integer overflow in % formatting");
      const long long n = v.is_float() ? static_cast<long long>(d) : v.as_int();
      const char type = spec.type == 'i' || spec.type == 'u' ? 'd' : spec.type;
      std::snprintf(buf, sizeof buf, (printf_spec + "ll" + type).c_str(), n);
      std::string out = buf;
      if (spec.type == 'o' && spec.flags.find('#') != std::string::npos) {  // Python writes 0o17, C writes 017
        const size_t at = out.find('0');
        if (at != std::string::npos) out.insert(at + 1, "o");
      }
      return out;
    }
    case 'f':
    case 'F':
    case 'e':
    case 'E':
    case 'g':
    case 'G':
      std::snprintf(buf, sizeof buf, (printf_spec + spec.type).c_str(), v.as_double());
      return buf;
    default:
      problem(std::string("unsupported format character '") + spec.type + "'");
  }
}

Value format_percent(Interpreter& in, const Value& format, const Value& args) {
  const std::string& f = format.str();
  const bool by_key = args.is_dict();
  const List positional = args.is_list() && args.is_tuple() ? args.list() : List{args};
  size_t next_arg = 0;
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) problem("incomplete format");
    Spec spec;
    if (f[i] == '(') {
      const size_t close = f.find(')', i);
      if (close == std::string::npos) problem("incomplete format key");
      spec.key = f.substr(i + 1, close - i - 1);
      i = close + 1;
    }
    while (i < f.size() && std::string_view("-+ #0").find(f[i]) != std::string_view::npos) spec.flags += f[i++];
    auto number = [&] {
      int n = 0;
      while (i < f.size() && f[i] >= '0' && f[i] <= '9') n = std::min(n * 10 + (f[i++] - '0'), 100000);
      return n;
    };
    if (i < f.size() && f[i] >= '0' && f[i] <= '9') spec.width = number();
    if (i < f.size() && f[i] == '.') {
      ++i;
      spec.precision = number();
    }
    if (i >= f.size()) problem("incomplete format");
    spec.type = f[i];
    if (spec.type == '%') {
      out += '%';
      continue;
    }
    Value arg;
    if (!spec.key.empty()) {
      if (!by_key) problem("format requires a mapping");
      const Value* v = args.dict().find(spec.key);
      if (!v) problem("KeyError: '" + spec.key + "'");
      arg = *v;
    } else if (by_key && !positional.empty() && next_arg == 0 && !args.is_list()) {
      arg = args;  // "%s" % {'a': 1} prints the dict
      ++next_arg;
    } else {
      if (next_arg >= positional.size()) problem("not enough arguments for format string");
      arg = positional[next_arg++];
    }
    std::string piece = format_one(in, spec, arg);
    if (format.safe()) piece = escaped_text(in, in.text(std::move(piece), arg.is_string() && arg.safe()));
    if (out.size() + piece.size() > in.max_string_bytes()) problem("string too long: more than the output limit");
    out += piece;
  }
  if (!by_key && next_arg < positional.size()) problem("not all arguments converted during string formatting");
  return in.text(std::move(out), format.safe());
}

}  // namespace

}  // namespace deltagen::jinja
