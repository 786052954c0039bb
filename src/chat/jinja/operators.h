// Python's operators on values: arithmetic with int/float/bool promotion and
// overflow checks, str and list concatenation and repetition (with
// markupsafe's escaping when one side is Markup), printf-style `%`, and `in`.
#pragma once
#include "chat/jinja/ast.h"
#include "chat/jinja/interpreter.h"

namespace deltagen::jinja {

Value binary_operator(Interpreter& in, Op op, const Value& a, const Value& b);
Value unary_operator(Op op, const Value& v);
// `item in container`.
bool contains(const Value& container, const Value& item);
// HTML escaping as markupsafe.escape does it (& < > " ').
std::string html_escape(std::string_view s);

}  // namespace deltagen::jinja
