// Numbers as the reports and the fidelity card print them.
#pragma once
#include <cstdio>
#include <string>

namespace deltagen {

// `v` through printf's `format` (one double conversion).
inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Three significant digits in scientific notation; exactly 0 as "0".
inline std::string sci(double v) { return v == 0 ? std::string("0") : fmt("%.3e", v); }

}  // namespace deltagen
