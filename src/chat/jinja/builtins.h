// Jinja's built-in filters, tests and global functions, and the methods of
// Python's str, dict and list that templates call, as Python Jinja in
// transformers' sandbox provides them. Each throws Problem for bad
// arguments; the evaluator adds the position.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "chat/jinja/interpreter.h"
#include "chat/jinja/value.h"

namespace deltagen::jinja {

// Whether the parser accepts a name after `|` or `is` (unknown ones are
// compile errors in Jinja, and here): "" when it does, else the problem.
std::string check_filter_name(std::string_view name);  // filters.cpp
std::string check_test_name(std::string_view name);    // builtin_tests.cpp

Value apply_filter(Interpreter& in, std::string_view name, const Value& operand, Args& args);  // filters.cpp
bool apply_test(Interpreter& in, std::string_view name, const Value& operand, Args& args);     // builtin_tests.cpp

// The global functions: range, namespace, dict, raise_exception, strftime_now.
bool is_global_name(std::string_view name);
Value call_global(Interpreter& in, std::string_view name, Args& args);  // globals.cpp

// Python methods: "" if `self` has a method `name`, else why not: "missing",
// or the message for one the immutable sandbox refuses (list.append).
std::string method_status(const Value& self, std::string_view name);
Value call_method(Interpreter& in, const Value& self, std::string_view name, Args& args);  // methods.cpp

// Binds a call's arguments to parameter names, Python style: positional in
// order, then keywords by name; too many or unknown ones are errors.
class ArgReader {
 public:
  ArgReader(const Args& args, std::string_view function, std::initializer_list<std::string_view> params);
  // The argument for parameter i, or null when not given.
  const Value* get(size_t i) const { return bound_[i]; }
  bool has(size_t i) const { return bound_[i] != nullptr; }
  Value get_or(size_t i, Value fallback) const { return bound_[i] ? *bound_[i] : std::move(fallback); }
  // Typed access; Problem when the argument has another type.
  std::string string_or(size_t i, std::string fallback) const;
  int64_t int_or(size_t i, int64_t fallback) const;
  bool bool_or(size_t i, bool fallback) const;
  std::optional<std::string> optional_string(size_t i) const;  // unset or None -> nullopt

 private:
  std::string function_;
  std::vector<std::string_view> params_;
  std::vector<const Value*> bound_;
};

}  // namespace deltagen::jinja
