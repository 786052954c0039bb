// The Python methods templates call on str, dict and list values. The
// methods that change a list or dict are refused, as transformers'
// ImmutableSandboxedEnvironment refuses them.
#include <algorithm>
#include <cstdio>

#include "chat/jinja/builtins.h"
#include "chat/jinja/problem.h"
#include "chat/jinja/pystr.h"

namespace deltagen::jinja {

std::string format_fields(Interpreter& in, const std::string& format, const Args& args);  // str_format.cpp

namespace {

constexpr std::string_view kStringMethods[] = {
    "capitalize", "casefold",   "center",    "count",    "endswith",   "find",      "format",       "index",
    "isalnum",    "isalpha",    "isdecimal", "isdigit",  "islower",    "isnumeric", "isspace",      "istitle",
    "isupper",    "join",       "ljust",     "lower",    "lstrip",     "partition", "removeprefix", "removesuffix",
    "replace",    "rfind",      "rindex",    "rjust",    "rpartition", "rsplit",    "rstrip",       "split",
    "splitlines", "startswith", "strip",     "swapcase", "title",      "upper",     "zfill"};
constexpr std::string_view kDictMethods[] = {"copy", "get", "items", "keys", "values"};
constexpr std::string_view kDictMutators[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kListMethods[] = {"copy", "count", "index"};
constexpr std::string_view kListMutators[] = {"append", "clear",  "extend",  "insert",
                                              "pop",    "remove", "reverse", "sort"};

template <size_t N>
bool among(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

std::string text_arg(const Value& v, const char* method) {
  if (!v.is_string()) problem(std::string(method) + "() argument must be str, not " + type_name(v));
  return v.str();
}

// startswith/endswith take a string or a tuple of strings.
bool affix_matches(const Value& affix, const std::string& s, bool prefix, const char* method) {
  auto one = [&](const Value& a) {
    const std::string t = text_arg(a, method);
    return prefix ? s.starts_with(t) : s.ends_with(t);
  };
  if (affix.is_list() && affix.is_tuple()) return std::any_of(affix.list().begin(), affix.list().end(), one);
  return one(affix);
}

// A slice of `s` by code point indexes [start, end) as str.find's optional arguments give them.
std::string_view window(const std::string& s, const ArgReader& a, size_t first_index_arg) {
  if (!a.has(first_index_arg) && !a.has(first_index_arg + 1)) return s;
  const auto offsets = pystr::offsets(s);
  const auto size = int64_t(offsets.size() - 1);
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  const int64_t b = clamp(a.int_or(first_index_arg, 0));
  const int64_t e = std::max(b, clamp(a.int_or(first_index_arg + 1, size)));
  return std::string_view(s).substr(offsets[size_t(b)], offsets[size_t(e)] - offsets[size_t(b)]);
}

Value justify(Interpreter& in, const std::string& s, const ArgReader& a, char how) {
  const int64_t width = a.int_or(0, 0);
  const std::string fill = a.has(1) ? text_arg(*a.get(1), "fill") : " ";
  if (pystr::length(fill) != 1) problem("The fill character must be exactly one character long");
  const auto len = int64_t(pystr::length(s));
  if (width <= len) return in.text(s);
  if (uint64_t(width) * fill.size() > in.max_string_bytes()) problem("width too large");
  const int64_t margin = width - len;
  int64_t left = how == 'r' ? margin : how == 'l' ? 0 : margin / 2 + (margin & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < margin - left; ++i) out += fill;
  return in.text(std::move(out));
}

Value string_list(Interpreter& in, const std::vector<std::string>& parts) {
  in.step(int64_t(parts.size()) / 16);
  List items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.push_back(in.text(p));
  return in.list(std::move(items));
}

template <class Pred>
bool all_chars(const std::string& s, Pred pred) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();)
    if (!pred(pystr::next(s, i))) return false;
  return true;
}

bool is_ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool is_letter(char32_t c) {
  // Letters: ASCII ones, and non-ASCII code points that are printable, not
  // spaces and not punctuation-like (an approximation of str.isalpha()).
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return pystr::is_printable(c) && !pystr::is_space(c) && !(c >= 0x2000 && c <= 0x2BFF) &&
         !(c >= 0x3000 && c <= 0x303F) && !(c >= 0xFF00 && c <= 0xFF20) && !(c >= 0xA0 && c <= 0xBF) && c != 0xD7 &&
         c != 0xF7;
}

Value string_method(Interpreter& in, const Value& self, std::string_view name, const Args& args) {
  const std::string& s = self.str();
  const bool safe = self.safe();
  const std::string m(name);
  if (name == "format") return in.text(format_fields(in, s, args), safe);
  if (name == "startswith" || name == "endswith") {
    ArgReader a(args, m, {"affix", "start", "end"});
    if (!a.has(0)) problem(m + "() takes at least 1 argument (0 given)");
    return Value(affix_matches(*a.get(0), std::string(window(s, a, 1)), name == "startswith", m.c_str()));
  }
  if (name == "split" || name == "rsplit") {
    ArgReader a(args, m, {"sep", "maxsplit"});
    const std::optional<std::string> sep = a.optional_string(0);
    const std::optional<std::string_view> sep_view = sep ? std::optional<std::string_view>(*sep) : std::nullopt;
    const int64_t maxsplit = a.int_or(1, -1);
    return string_list(in,
                       name == "split" ? pystr::split(s, sep_view, maxsplit) : pystr::rsplit(s, sep_view, maxsplit));
  }
  if (name == "splitlines") {
    ArgReader a(args, m, {"keepends"});
    return string_list(in, pystr::splitlines(s, a.bool_or(0, false)));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgReader a(args, m, {"chars"});
    const std::optional<std::string> chars = a.optional_string(0);
    const auto stripped = pystr::strip(s, chars ? std::optional<std::string_view>(*chars) : std::nullopt,
                                       name != "rstrip", name != "lstrip");
    return in.text(std::string(stripped), safe);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgReader a(args, m, {"affix"});
    const std::string affix = text_arg(a.get_or(0, Value(std::string())), m.c_str());
    if (name == "removeprefix" && s.starts_with(affix)) return in.text(s.substr(affix.size()), safe);
    if (name == "removesuffix" && !affix.empty() && s.ends_with(affix))
      return in.text(s.substr(0, s.size() - affix.size()), safe);
    return self;
  }
  if (name == "lower" || name == "casefold" || name == "upper" || name == "title" || name == "capitalize" ||
      name == "swapcase") {
    ArgReader none(args, m, {});
    if (name == "upper") return in.text(pystr::upper(s), safe);
    if (name == "title") return in.text(pystr::title(s), safe);
    if (name == "capitalize") return in.text(pystr::capitalize(s), safe);
    if (name == "swapcase") return in.text(pystr::swapcase(s), safe);
    return in.text(pystr::lower(s), safe);
  }
  if (name == "replace") {
    ArgReader a(args, m, {"old", "new", "count"});
    if (!a.has(0) || !a.has(1)) problem("replace() takes at least 2 arguments");
    return in.text(pystr::replace(s, text_arg(*a.get(0), "replace"), text_arg(*a.get(1), "replace"), a.int_or(2, -1),
                                  in.max_string_bytes()));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    ArgReader a(args, m, {"sub", "start", "end"});
    if (!a.has(0)) problem(m + "() takes at least 1 argument (0 given)");
    const std::string sub = text_arg(*a.get(0), m.c_str());
    const std::string_view w = window(s, a, 1);
    if (name == "count") return Value(pystr::count(w, sub));
    int64_t at = name == "find" || name == "index" ? pystr::find(w, sub) : pystr::rfind(w, sub);
    if (at < 0) {
      if (name == "index" || name == "rindex") problem("substring not found");
      return Value(int64_t(-1));
    }
    const auto skipped = int64_t(pystr::length(std::string_view(s).substr(0, size_t(w.data() - s.data()))));
    return Value(at + skipped);
  }
  if (name == "join") {
    ArgReader a(args, m, {"iterable"});
    std::string out;
    bool first = true;
    const List items = iterate(a.get_or(0, Value::none()));
    in.step(int64_t(items.size()));
    for (const Value& item : items) {
      if (!item.is_string()) problem("sequence item: expected str instance, " + type_name(item) + " found");
      if (out.size() + s.size() + item.str().size() > in.max_string_bytes()) problem("join: result too long");
      if (!first) out += s;
      out += item.str();
      first = false;
    }
    return in.text(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    ArgReader a(args, m, {"width", "fillchar"});
    return justify(in, s, a, name[0] == 'c' ? 'c' : name[0]);
  }
  if (name == "zfill") {
    ArgReader a(args, m, {"width"});
    const auto len = int64_t(pystr::length(s));
    const int64_t width = a.int_or(0, 0);
    if (width <= len) return self;
    if (uint64_t(width) > in.max_string_bytes()) problem("width too large");
    const size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
    return in.text(s.substr(0, sign) + std::string(size_t(width - len), '0') + s.substr(sign));
  }
  if (name == "partition" || name == "rpartition") {
    ArgReader a(args, m, {"sep"});
    const std::string sep = text_arg(a.get_or(0, Value::none()), m.c_str());
    if (sep.empty()) problem("empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return name == "partition" ? in.list({in.text(s), Value(""), Value("")}, true)
                                 : in.list({Value(""), Value(""), in.text(s)}, true);
    return in.list({in.text(s.substr(0, at)), Value(sep), in.text(s.substr(at + sep.size()))}, true);
  }
  ArgReader none(args, m, {});
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return Value(all_chars(s, is_ascii_digit));
  if (name == "isalpha") return Value(all_chars(s, is_letter));
  if (name == "isalnum") return Value(all_chars(s, [](char32_t c) { return is_letter(c) || is_ascii_digit(c); }));
  if (name == "isspace") return Value(all_chars(s, pystr::is_space));
  if (name == "islower") return Value(pystr::is_lower(s));
  if (name == "isupper") return Value(pystr::is_upper(s));
  if (name == "istitle") return Value(!s.empty() && pystr::title(s) == s && pystr::lower(s) != s);
  problem("'str' object has no attribute '" + m + "'");
}

Value dict_method(Interpreter& in, const Value& self, std::string_view name, const Args& args) {
  const Dict& d = self.dict();
  const std::string m(name);
  if (name == "get") {
    ArgReader a(args, m, {"key", "default"});
    if (!a.has(0)) problem("get expected at least 1 argument, got 0");
    const Value& key = *a.get(0);
    require_hashable(key);
    if (const Value* v = d.find(key)) return *v;
    return a.get_or(1, Value::none());
  }
  ArgReader none(args, m, {});
  in.step(int64_t(d.size()) / 16);
  List out;
  out.reserve(d.size());
  if (name == "copy") return self;  // immutable: the copy may share
  for (const auto& [k, v] : d.items) {
    if (name == "keys") out.push_back(k);
    if (name == "values") out.push_back(v);
    if (name == "items") out.push_back(in.list({k, v}, true));
  }
  return in.list(std::move(out));
}

Value list_method(Interpreter& in, const Value& self, std::string_view name, const Args& args) {
  const List& items = self.list();
  const std::string m(name);
  if (name == "copy") {
    ArgReader none(args, m, {});
    return self;
  }
  ArgReader a(args, m, {"value"});
  if (!a.has(0)) problem(m + "() takes exactly one argument (0 given)");
  in.step(int64_t(items.size()) / 16);
  if (name == "count")
    return Value(
        int64_t(std::count_if(items.begin(), items.end(), [&](const Value& v) { return equals(v, *a.get(0)); })));
  for (size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], *a.get(0))) return Value(int64_t(i));
  problem(short_repr(*a.get(0)) + " is not in list");
}

}  // namespace

std::string method_status(const Value& self, std::string_view name) {
  if (self.is_string()) return among(kStringMethods, name) ? "" : "missing";
  if (self.is_dict()) {
    if (among(kDictMethods, name)) return "";
    if (among(kDictMutators, name))
      return "access to attribute '" + std::string(name) + "' of 'dict' object is unsafe.";
  }
  if (self.is_list()) {
    if (among(kListMethods, name) && !(self.is_tuple() && name == "copy")) return "";
    if (!self.is_tuple() && among(kListMutators, name))
      return "access to attribute '" + std::string(name) + "' of 'list' object is unsafe.";
  }
  return "missing";
}

Value call_method(Interpreter& in, const Value& self, std::string_view name, Args& args) {
  if (self.is_string()) return string_method(in, self, name, args);
  if (self.is_dict()) return dict_method(in, self, name, args);
  if (self.is_list()) return list_method(in, self, name, args);
  problem("'" + type_name(self) + "' object has no attribute '" + std::string(name) + "'");
}

}  // namespace deltagen::jinja
