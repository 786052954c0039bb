// The values a template computes with, modelled on the Python objects Jinja
// sees in transformers: str (with markupsafe's Markup as a flag), int, float,
// bool, None, list and tuple, dict (insertion-ordered), Jinja's Undefined and
// namespace, and callables (macros, globals, bound methods).
//
// Values are cheap to copy: strings, lists and dicts are shared and never
// changed after they are built (the sandbox HF renders with is immutable);
// the one mutable object is the namespace, which `set ns.x = ...` writes.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace deltagen::jinja {

class Value;
struct Dict;
struct Namespace;
struct Callable;
struct LoopState;

using List = std::vector<Value>;

// How deep lists, dicts and namespaces may nest in one another. Nesting is
// checked where containers are built, and the functions that walk values
// (printing, ==, tojson) stop there too, so none of them recurses without
// bound, even through a namespace that contains itself.
inline constexpr int kMaxNesting = 512;

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable, Loop };

  // Undefined. `hint` is what using it says ("'x' is undefined"); empty: a
  // generic message.
  Value() = default;
  static Value undefined(std::string hint);
  static Value none();
  explicit Value(bool b) : data_(b) {}
  explicit Value(int64_t i) : data_(i) {}
  explicit Value(int i) : data_(int64_t(i)) {}
  explicit Value(double f) : data_(f) {}
  explicit Value(std::string s, bool safe = false);
  explicit Value(const char* s) : Value(std::string(s)) {}
  // Throws Problem past kMaxNesting.
  explicit Value(List items, bool tuple = false);
  explicit Value(std::shared_ptr<const Dict> dict) : data_(std::move(dict)) {}
  explicit Value(std::shared_ptr<Namespace> ns) : data_(std::move(ns)) {}
  explicit Value(std::shared_ptr<const Callable> fn) : data_(std::move(fn)) {}
  explicit Value(std::shared_ptr<const LoopState> loop) : data_(std::move(loop)) {}

  Kind kind() const { return Kind(data_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  // int, float or bool: what Python arithmetic accepts (bool is an int).
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }  // list or tuple
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_namespace() const { return kind() == Kind::Namespace; }
  bool is_callable() const { return kind() == Kind::Callable; }
  bool is_loop() const { return kind() == Kind::Loop; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;    // int or bool
  double as_double() const;  // int, float or bool
  const std::string& str() const { return std::get<StringPtr>(data_)->text; }
  bool safe() const { return std::get<StringPtr>(data_)->safe; }  // a Markup string
  const List& list() const { return std::get<ListPtr>(data_)->items; }
  bool is_tuple() const { return std::get<ListPtr>(data_)->tuple; }
  const Dict& dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Namespace& ns() const { return *std::get<std::shared_ptr<Namespace>>(data_); }
  const std::shared_ptr<Namespace>& ns_ptr() const { return std::get<std::shared_ptr<Namespace>>(data_); }
  const Callable& callable() const { return *std::get<std::shared_ptr<const Callable>>(data_); }
  const LoopState& loop() const { return *std::get<std::shared_ptr<const LoopState>>(data_); }
  // The message for using an undefined value.
  std::string undefined_message() const;

  // Same object (Python `is`): identity for containers, value for scalars.
  bool same_object(const Value& other) const;
  // Containers nested inside this one, plus one (a namespace counts 1); 0 for scalars.
  int nesting() const;

 private:
  struct NoneTag {};
  struct StringData {
    std::string text;
    bool safe;
  };
  struct ListData {
    List items;
    bool tuple;
    int nesting;
  };
  using StringPtr = std::shared_ptr<const StringData>;
  using ListPtr = std::shared_ptr<const ListData>;
  using UndefinedPtr = std::shared_ptr<const std::string>;  // the hint; may be null

  std::variant<UndefinedPtr, NoneTag, bool, int64_t, double, StringPtr, ListPtr, std::shared_ptr<const Dict>,
               std::shared_ptr<Namespace>, std::shared_ptr<const Callable>, std::shared_ptr<const LoopState>>
      data_;
};

// An insertion-ordered dict. Keys are compared like Python's (1 == 1.0 ==
// True); string keys, the only kind JSON has, are found through an index.
struct Dict {
  std::vector<std::pair<Value, Value>> items;

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Inserts, or replaces the value of an equal key in its old place.
  // Throws Problem past kMaxNesting.
  void set(const Value& key, Value value);
  size_t size() const { return items.size(); }
  int nesting() const { return nesting_; }

 private:
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, size_t, TextHash, std::equal_to<>> string_index_;
  int nesting_ = 1;
};

// Jinja's namespace(): the object `set ns.attr = ...` can change across scopes.
struct Namespace {
  Dict attrs;
};

// The state behind `loop` in a for body.
struct LoopState {
  std::shared_ptr<const List> items;  // after the loop's `if` filter
  int64_t index0 = 0;
};

// Python's truthiness.
bool truthy(const Value& v);
// Python's ==.
bool equals(const Value& a, const Value& b);
// Throws Problem "unhashable type" for what cannot be a dict key or set
// member in Python: lists, dicts, and tuples holding them.
void require_hashable(const Value& v);
// Python's ordering for <, sort, min/max: -1, 0, 1. Throws Problem for types
// Python cannot order ('<' not supported between 'int' and 'str').
int compare(const Value& a, const Value& b);

// The items a for loop walks, as Python iterates: a list's items, a dict's
// keys, a string's characters, nothing for undefined. Throws Problem for
// what is not iterable.
List iterate(const Value& v);

// Python's type name, for messages: 'str', 'int', 'dict', 'NoneType', ...
std::string type_name(const Value& v);

// str(v) as Jinja prints it ({{ v }}, the string filter): None -> "None",
// True -> "True", floats as Python's repr, lists and dicts as Python's repr,
// undefined -> "". Throws Problem past max_bytes (a list can repeat a big
// string many times).
std::string to_str(const Value& v, size_t max_bytes);
// repr(v): strings quoted.
std::string repr(const Value& v, size_t max_bytes);
// repr(v) cut to about 200 bytes, for messages.
std::string short_repr(const Value& v);

// Python's repr(float): the shortest digits that read back the same, in
// fixed notation for exponents -4..15 (1.0, 0.0001, 1e-05, 1e+16, inf, nan).
std::string float_repr(double f);

// The context's JSON as values: objects become dicts in the given key order,
// integers ints (beyond int64: floats), other numbers floats. Throws Problem
// for invalid UTF-8 or nesting deeper than max_depth.
Value from_json(const nlohmann::ordered_json& j, int max_depth);

}  // namespace deltagen::jinja
