#include "chat/jinja/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja/problem.h"
#include "chat/jinja/pystr.h"

namespace deltagen::jinja {
namespace {

class JsonWriter {
 public:
  JsonWriter(const JsonOptions& o, size_t max_bytes)
      : options_(o),
        item_separator_(o.item_separator.value_or(o.indent ? "," : ", ")),
        key_separator_(o.key_separator.value_or(": ")),
        max_bytes_(max_bytes) {}

  void write(const Value& v, int depth) {
    if (depth > kMaxNesting) problem("tojson: values nested more than " + std::to_string(kMaxNesting) + " deep");
    switch (v.kind()) {
      case Value::Kind::None:
        return add("null");
      case Value::Kind::Bool:
        return add(v.as_bool() ? "true" : "false");
      case Value::Kind::Int:
        return add(std::to_string(v.as_int()));
      case Value::Kind::Float:
        return add(json_float(v.as_double()));
      case Value::Kind::String:
        return write_string(v.str());
      case Value::Kind::List:
        return write_list(v.list(), depth);
      case Value::Kind::Dict:
        return write_dict(v.dict(), depth);
      default:
        problem("tojson: Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void add(std::string_view s) {
    if (out_.size() + s.size() > max_bytes_)
      problem("output too large: more than " + std::to_string(max_bytes_) + " bytes");
    out_ += s;
  }

  static std::string json_float(double f) {
    if (std::isnan(f)) return "NaN";
    if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
    return float_repr(f);
  }

  void newline(int depth) {
    add("\n");
    for (int i = 0; i < depth; ++i) add(*options_.indent);
  }

  void write_list(const List& items, int depth) {
    if (items.empty()) return add("[]");
    add("[");
    if (options_.indent) newline(depth + 1);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) {
        add(item_separator_);
        if (options_.indent) newline(depth + 1);
      }
      write(items[i], depth + 1);
    }
    if (options_.indent) newline(depth);
    add("]");
  }

  // json.dumps turns scalar keys into strings; anything else is a TypeError.
  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::String:
        return k.str();
      case Value::Kind::None:
        return "null";
      case Value::Kind::Bool:
        return k.as_bool() ? "true" : "false";
      case Value::Kind::Int:
        return std::to_string(k.as_int());
      case Value::Kind::Float:
        return json_float(k.as_double());
      default:
        problem("tojson: keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void write_dict(const Dict& d, int depth) {
    if (d.size() == 0) return add("{}");
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : d.items) entries.push_back(&e);
    if (options_.sort_keys)
      std::stable_sort(entries.begin(), entries.end(),
                       [](auto* a, auto* b) { return compare(a->first, b->first) < 0; });
    add("{");
    if (options_.indent) newline(depth + 1);
    bool first = true;
    for (const auto* e : entries) {
      if (!first) {
        add(item_separator_);
        if (options_.indent) newline(depth + 1);
      }
      first = false;
      write_string(key_text(e->first));
      add(key_separator_);
      write(e->second, depth + 1);
    }
    if (options_.indent) newline(depth);
    add("}");
  }

  void write_string(std::string_view s) {
    std::string q = "\"";
    for (size_t i = 0; i < s.size();) {
      const size_t begin = i;
      const char32_t c = pystr::next(s, i);
      switch (c) {
        case '"':
          q += "\\\"";
          continue;
        case '\\':
          q += "\\\\";
          continue;
        case '\n':
          q += "\\n";
          continue;
        case '\r':
          q += "\\r";
          continue;
        case '\t':
          q += "\\t";
          continue;
        case '\b':
          q += "\\b";
          continue;
        case '\f':
          q += "\\f";
          continue;
        default:
          break;
      }
      if (c < 0x20 || (options_.ensure_ascii && c >= 0x7F)) {
        append_escape(q, c);
      } else {
        q += s.substr(begin, i - begin);
      }
    }
    q += '"';
    add(q);
  }

  static void append_escape(std::string& q, char32_t c) {
    char buf[16];
    if (c >= 0x10000) {  // a surrogate pair, as json.dumps writes it
      const char32_t v = c - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", unsigned(0xD800 + (v >> 10)), unsigned(0xDC00 + (v & 0x3FF)));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
    }
    q += buf;
  }

  const JsonOptions& options_;
  const std::string item_separator_, key_separator_;
  const size_t max_bytes_;
  std::string out_;
};

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options, size_t max_bytes) {
  JsonWriter w(options, max_bytes);
  w.write(v, 0);
  return w.take();
}

}  // namespace deltagen::jinja
