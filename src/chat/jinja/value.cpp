#include "chat/jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "chat/jinja/problem.h"
#include "chat/jinja/pystr.h"
#include "chat/jinja/work.h"
#include "tokenizer/utf8.h"

namespace deltagen::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.data_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.data_ = NoneTag{};
  return v;
}

Value::Value(std::string s, bool safe) : data_(std::make_shared<const StringData>(StringData{std::move(s), safe})) {}

Value::Value(List items, bool tuple) {
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, item.nesting());
  if (deepest + 1 > kMaxNesting) problem("values nested more than " + std::to_string(kMaxNesting) + " deep");
  data_ = std::make_shared<const ListData>(ListData{std::move(items), tuple, deepest + 1});
}

int64_t Value::as_int() const { return is_bool() ? int64_t(as_bool()) : std::get<int64_t>(data_); }

double Value::as_double() const {
  if (is_float()) return std::get<double>(data_);
  return double(as_int());
}

std::string Value::undefined_message() const {
  const auto& hint = std::get<UndefinedPtr>(data_);
  return hint ? *hint : "value is undefined";
}

int Value::nesting() const {
  switch (kind()) {
    case Kind::List:
      return std::get<ListPtr>(data_)->nesting;
    case Kind::Dict:
      return dict().nesting();
    case Kind::Namespace:
      return 1;
    default:
      return 0;
  }
}

bool Value::same_object(const Value& other) const {
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::String:
      return std::get<StringPtr>(data_) == std::get<StringPtr>(other.data_) || equals(*this, other);
    case Kind::List:
      return std::get<ListPtr>(data_) == std::get<ListPtr>(other.data_);
    case Kind::Dict:
      return &dict() == &other.dict();
    case Kind::Namespace:
      return &ns() == &other.ns();
    case Kind::Callable:
      return &callable() == &other.callable();
    case Kind::Loop:
      return &loop() == &other.loop();
    default:
      return equals(*this, other);
  }
}

// ---- Dict ----

const Value* Dict::find(std::string_view key) const {
  charge_scan(key.size());  // hashing the key
  auto it = string_index_.find(key);
  return it == string_index_.end() ? nullptr : &items[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (const auto& [k, v] : items)
    if (!k.is_string() && equals(k, key)) return &v;
  return nullptr;
}

void Dict::set(const Value& key, Value value) {
  if (value.nesting() + 1 > kMaxNesting) problem("values nested more than " + std::to_string(kMaxNesting) + " deep");
  nesting_ = std::max(nesting_, value.nesting() + 1);
  if (key.is_string()) {
    charge_scan(key.str().size());
    auto [it, inserted] = string_index_.emplace(key.str(), items.size());
    if (inserted)
      items.emplace_back(key, std::move(value));
    else
      items[it->second].second = std::move(value);
    return;
  }
  for (auto& [k, v] : items) {
    if (!k.is_string() && equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

// ---- truthiness, equality, order ----

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return false;
    case Value::Kind::Bool:
      return v.as_bool();
    case Value::Kind::Int:
      return v.as_int() != 0;
    case Value::Kind::Float:
      return v.as_double() != 0.0;
    case Value::Kind::String:
      return !v.str().empty();
    case Value::Kind::List:
      return !v.list().empty();
    case Value::Kind::Dict:
      return v.dict().size() != 0;
    default:
      return true;
  }
}

namespace {

void check_nesting(int depth) {
  if (depth > kMaxNesting) problem("values nested more than " + std::to_string(kMaxNesting) + " deep");
}

// int64 and double compare exactly as long doubles (64-bit mantissa), as Python compares int with float.
int compare_numbers(const Value& a, const Value& b) {
  if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  const long double x = a.is_float() ? (long double)a.as_double() : (long double)a.as_int();
  const long double y = b.is_float() ? (long double)b.as_double() : (long double)b.as_int();
  return x < y ? -1 : x > y ? 1 : 0;
}

bool equals_at(const Value& a, const Value& b, int depth) {
  check_nesting(depth);
  if (a.is_number() && b.is_number()) {
    if (std::isnan(a.as_double()) || std::isnan(b.as_double())) return false;
    return compare_numbers(a, b) == 0;
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::String:
      if (a.str().size() != b.str().size()) return false;
      charge_scan(a.str().size());
      return a.str() == b.str();
    case Value::Kind::List: {
      if (a.is_tuple() != b.is_tuple() || a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i)
        if (!equals_at(a.list()[i], b.list()[i], depth + 1)) return false;
      return true;
    }
    case Value::Kind::Dict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* other = b.dict().find(k);
        if (!other || !equals_at(v, *other, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a.same_object(b);
  }
}

int compare_at(const Value& a, const Value& b, int depth) {
  check_nesting(depth);
  if (a.is_number() && b.is_number()) return compare_numbers(a, b);
  if (a.is_string() && b.is_string()) {
    charge_scan(std::min(a.str().size(), b.str().size()));
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const List &x = a.list(), &y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals_at(x[i], y[i], depth + 1)) continue;
      return compare_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  problem("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

}  // namespace

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

void require_hashable(const Value& v) {
  if (v.is_dict() || (v.is_list() && !v.is_tuple())) problem("unhashable type: '" + type_name(v) + "'");
  if (v.is_list())
    for (const Value& item : v.list()) require_hashable(item);  // tuples nest at most kMaxNesting deep
}
int compare(const Value& a, const Value& b) { return compare_at(a, b, 0); }

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::List:
      return v.list();
    case Value::Kind::Dict: {
      List keys;
      keys.reserve(v.dict().size());
      for (const auto& [k, item] : v.dict().items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      const std::string& s = v.str();
      for (size_t i = 0; i < s.size();) {
        const size_t begin = i;
        pystr::next(s, i);
        chars.emplace_back(s.substr(begin, i - begin));
      }
      return chars;
    }
    case Value::Kind::Undefined:
      return {};  // Jinja's default Undefined iterates as empty
    default:
      problem("'" + type_name(v) + "' object is not iterable");
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return "Undefined";
    case Value::Kind::None:
      return "NoneType";
    case Value::Kind::Bool:
      return "bool";
    case Value::Kind::Int:
      return "int";
    case Value::Kind::Float:
      return "float";
    case Value::Kind::String:
      return v.safe() ? "Markup" : "str";
    case Value::Kind::List:
      return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::Dict:
      return "dict";
    case Value::Kind::Namespace:
      return "Namespace";
    case Value::Kind::Callable:
      return "function";
    case Value::Kind::Loop:
      return "LoopContext";
  }
  return "object";
}

// ---- printing ----

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  // Shortest round-trip digits in scientific form: "-1.2345e+02".
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  (void)ec;
  std::string_view sci(buf, size_t(end - buf));
  std::string out;
  if (sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits += c;
  const int exponent = std::stoi(std::string(sci.substr(e + 1)));
  const int point = exponent + 1;  // digits = 0.d1d2... x 10^point
  const int n = int(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0)
      out += "0." + std::string(size_t(-point), '0') + digits;
    else if (point >= n)
      out += digits + std::string(size_t(point - n), '0') + ".0";
    else
      out += digits.substr(0, size_t(point)) + "." + digits.substr(size_t(point));
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

namespace {

struct Printer {
  std::string out;
  size_t max_bytes;

  void add(std::string_view s) {
    if (out.size() + s.size() > max_bytes)
      problem("output too large: more than " + std::to_string(max_bytes) + " bytes");
    out += s;
  }

  void print(const Value& v, bool quoted, int depth) {
    check_nesting(depth);
    switch (v.kind()) {
      case Value::Kind::Undefined:
        return add(quoted ? "Undefined" : "");
      case Value::Kind::None:
        return add("None");
      case Value::Kind::Bool:
        return add(v.as_bool() ? "True" : "False");
      case Value::Kind::Int:
        return add(std::to_string(v.as_int()));
      case Value::Kind::Float:
        return add(float_repr(v.as_double()));
      case Value::Kind::String:
        if (!quoted) return add(v.str());
        if (v.safe()) return add("Markup(" + pystr::repr(v.str()) + ")");
        return add(pystr::repr(v.str()));
      case Value::Kind::List: {
        add(v.is_tuple() ? "(" : "[");
        for (size_t i = 0; i < v.list().size(); ++i) {
          if (i) add(", ");
          print(v.list()[i], true, depth + 1);
        }
        if (v.is_tuple() && v.list().size() == 1) add(",");
        return add(v.is_tuple() ? ")" : "]");
      }
      case Value::Kind::Dict:
        return print_dict(v.dict(), depth);
      case Value::Kind::Namespace:
        add("<Namespace ");
        print_dict(v.ns().attrs, depth);
        return add(">");
      case Value::Kind::Callable:
        return add("<function>");
      case Value::Kind::Loop:
        return add("<LoopContext " + std::to_string(v.loop().index0 + 1) + "/" +
                   std::to_string(v.loop().items->size()) + ">");
    }
  }

  void print_dict(const Dict& d, int depth) {
    add("{");
    bool first = true;
    for (const auto& [k, item] : d.items) {
      if (!first) add(", ");
      first = false;
      print(k, true, depth + 1);
      add(": ");
      print(item, true, depth + 1);
    }
    add("}");
  }
};

}  // namespace

std::string to_str(const Value& v, size_t max_bytes) {
  if (v.is_string()) return v.str();
  Printer p{{}, max_bytes};
  p.print(v, false, 0);
  return std::move(p.out);
}

std::string repr(const Value& v, size_t max_bytes) {
  Printer p{{}, max_bytes};
  p.print(v, true, 0);
  return std::move(p.out);
}

std::string short_repr(const Value& v) {
  constexpr size_t kShort = 200;
  try {
    return repr(v, kShort);
  } catch (const Problem&) {  // longer (or nested too deep): say so
    return "<" + type_name(v) + " too long to show>";
  }
}

// ---- JSON in ----

namespace {

Value json_string(const std::string& s) {
  if (auto bad = tok::find_invalid_utf8(s))
    problem("context string is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
  return Value(s);
}

Value from_json_at(const nlohmann::ordered_json& j, int depth, int max_depth) {
  if (depth > max_depth) problem("context nested more than " + std::to_string(max_depth) + " deep");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u <= uint64_t(INT64_MAX) ? Value(int64_t(u)) : Value(double(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return json_string(j.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json_at(item, depth + 1, max_depth));
      return Value(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, item] : j.items()) d->set(json_string(k), from_json_at(item, depth + 1, max_depth));
      return Value(std::shared_ptr<const Dict>(std::move(d)));
    }
    default:
      problem("context holds a value JSON cannot say (binary or discarded)");
  }
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j, int max_depth) {
  return from_json_at(j, 0, std::min(max_depth, kMaxNesting - 1));
}

}  // namespace deltagen::jinja
