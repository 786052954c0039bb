// One error type for everything a user can cause (bad files, bad flags).
// what() is a single line: "<file or subject>: <problem>". The CLI prints it
// after "error: " and exits nonzero.
#pragma once
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace deltagen {

// Messages quote what the files say (tensor names, tokens, dtypes), and a
// file can say anything: control characters are written as \n, \t, \xNN, so
// that what() stays one line and printing it cannot drive the terminal.
inline std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    }
  }
  return out;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(one_line(message)) {}
  explicit Error(const char* message) : std::runtime_error(one_line(message)) {}
};

[[noreturn]] inline void fail(const std::string& subject, const std::string& problem) {
  throw Error(subject + ": " + problem);
}

}  // namespace deltagen
