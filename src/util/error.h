// One error type for everything a user can cause (bad files, bad flags).
// what() is a single line: "<file or subject>: <problem>". The CLI prints it
// after "error: " and exits nonzero.
#pragma once
#include <stdexcept>
#include <string>

namespace deltagen {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& subject, const std::string& problem) {
  throw Error(subject + ": " + problem);
}

}  // namespace deltagen
