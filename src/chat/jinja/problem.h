// The exception the engine's helpers throw before anyone knows where in the
// template they are: a filter, a string method, a value conversion. The
// evaluator catches it at the innermost expression or statement and rethrows
// it as deltagen::Error "NAME:LINE:COL: message"; nothing else sees it.
#pragma once
#include <string>

namespace deltagen::jinja {

struct Problem {
  std::string message;
};

[[noreturn]] inline void problem(std::string message) { throw Problem{std::move(message)}; }

}  // namespace deltagen::jinja
