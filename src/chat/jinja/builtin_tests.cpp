// Jinja's tests (`x is name`), with Python's type rules: bool is a number
// but not an integer, undefined is iterable and a sequence (it has __iter__,
// __len__ and __getitem__), a dict is a sequence too.
#include <cmath>
#include <unordered_map>

#include "chat/jinja/builtins.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/problem.h"
#include "chat/jinja/pystr.h"

namespace deltagen::jinja {
namespace {

using Test = bool (*)(Interpreter& in, const Value& v, const Args& args);

// The one argument of a comparison test.
const Value& other(const Args& args, const char* test) {
  ArgReader a(args, test, {"other"});
  if (!a.has(0)) problem(std::string("test '") + test + "' needs an argument");
  return *a.get(0);
}

bool no_args(const Args& args, const char* test) {
  ArgReader a(args, test, {});
  return true;
}

bool parity(const Value& v, int64_t remainder, const char* test) {
  if (v.is_float()) {
    double m = std::fmod(v.as_double(), 2.0);
    if (m < 0) m += 2.0;
    return m == double(remainder);
  }
  if (!v.is_int() && !v.is_bool()) problem(std::string("test '") + test + "' needs a number, not " + type_name(v));
  return ((v.as_int() % 2) + 2) % 2 == remainder;
}

const std::unordered_map<std::string_view, Test>& test_table() {
  static const std::unordered_map<std::string_view, Test> table = {
      {"defined",
       [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "defined") && !v.is_undefined(); }},
      {"undefined",
       [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "undefined") && v.is_undefined(); }},
      {"none", [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "none") && v.is_none(); }},
      {"boolean", [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "boolean") && v.is_bool(); }},
      {"true",
       [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "true") && v.is_bool() && v.as_bool(); }},
      {"false",
       [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "false") && v.is_bool() && !v.as_bool(); }},
      {"integer", [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "integer") && v.is_int(); }},
      {"float", [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "float") && v.is_float(); }},
      {"number", [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "number") && v.is_number(); }},
      {"string", [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "string") && v.is_string(); }},
      {"mapping", [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "mapping") && v.is_dict(); }},
      {"iterable",
       [](Interpreter&, const Value& v, const Args& a) {
         return no_args(a, "iterable") &&
                (v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() || v.is_loop());
       }},
      {"sequence",
       [](Interpreter&, const Value& v, const Args& a) {
         return no_args(a, "sequence") && (v.is_string() || v.is_list() || v.is_dict() || v.is_undefined());
       }},
      {"callable",
       [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "callable") && v.is_callable(); }},
      {"escaped",
       [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "escaped") && v.is_string() && v.safe(); }},
      {"lower", [](Interpreter& in, const Value& v,
                   const Args& a) { return no_args(a, "lower") && pystr::is_lower(in.str(v)); }},
      {"upper", [](Interpreter& in, const Value& v,
                   const Args& a) { return no_args(a, "upper") && pystr::is_upper(in.str(v)); }},
      {"odd", [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "odd") && parity(v, 1, "odd"); }},
      {"even", [](Interpreter&, const Value& v, const Args& a) { return no_args(a, "even") && parity(v, 0, "even"); }},
      {"divisibleby",
       [](Interpreter& in, const Value& v, const Args& a) {
         ArgReader r(a, "divisibleby", {"num"});
         if (!r.has(0)) problem("test 'divisibleby' needs an argument");
         return equals(binary_operator(in, Op::Mod, v, *r.get(0)), Value(int64_t(0)));
       }},
      {"sameas", [](Interpreter&, const Value& v, const Args& a) { return v.same_object(other(a, "sameas")); }},
      {"in", [](Interpreter&, const Value& v, const Args& a) { return contains(other(a, "in"), v); }},
      {"eq", [](Interpreter&, const Value& v, const Args& a) { return equals(v, other(a, "eq")); }},
      {"equalto", [](Interpreter&, const Value& v, const Args& a) { return equals(v, other(a, "equalto")); }},
      {"==", [](Interpreter&, const Value& v, const Args& a) { return equals(v, other(a, "==")); }},
      {"ne", [](Interpreter&, const Value& v, const Args& a) { return !equals(v, other(a, "ne")); }},
      {"!=", [](Interpreter&, const Value& v, const Args& a) { return !equals(v, other(a, "!=")); }},
      {"lt", [](Interpreter&, const Value& v, const Args& a) { return compare(v, other(a, "lt")) < 0; }},
      {"lessthan", [](Interpreter&, const Value& v, const Args& a) { return compare(v, other(a, "lessthan")) < 0; }},
      {"<", [](Interpreter&, const Value& v, const Args& a) { return compare(v, other(a, "<")) < 0; }},
      {"le", [](Interpreter&, const Value& v, const Args& a) { return compare(v, other(a, "le")) <= 0; }},
      {"<=", [](Interpreter&, const Value& v, const Args& a) { return compare(v, other(a, "<=")) <= 0; }},
      {"gt", [](Interpreter&, const Value& v, const Args& a) { return compare(v, other(a, "gt")) > 0; }},
      {"greaterthan",
       [](Interpreter&, const Value& v, const Args& a) { return compare(v, other(a, "greaterthan")) > 0; }},
      {">", [](Interpreter&, const Value& v, const Args& a) { return compare(v, other(a, ">")) > 0; }},
      {"ge", [](Interpreter&, const Value& v, const Args& a) { return compare(v, other(a, "ge")) >= 0; }},
      {">=", [](Interpreter&, const Value& v, const Args& a) { return compare(v, other(a, ">=")) >= 0; }},
      {"filter",
       [](Interpreter&, const Value& v,
          const Args& a) { return no_args(a, "filter") && v.is_string() && check_filter_name(v.str()).empty(); }},
      {"test", [](Interpreter&, const Value& v,
                  const Args& a) { return no_args(a, "test") && v.is_string() && check_test_name(v.str()).empty(); }},
  };
  return table;
}

}  // namespace

std::string check_test_name(std::string_view name) {
  if (test_table().count(name)) return "";
  return "no test named '" + std::string(name) + "'";
}

bool apply_test(Interpreter& in, std::string_view name, const Value& operand, Args& args) {
  auto it = test_table().find(name);
  if (it == test_table().end()) problem("no test named '" + std::string(name) + "'");
  return it->second(in, operand, args);
}

}  // namespace deltagen::jinja
