// Numbers as the reports, the fidelity card and error messages print them.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace deltagen {

// `v` through printf's `format` (one double conversion).
inline std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Three significant digits in scientific notation; exactly 0 as "0".
inline std::string sci(double v) { return v == 0 ? std::string("0") : fmt("%.3e", v); }

// A tensor shape as "[2,3,4]".
inline std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';  // piece by piece: GCC 12 warns (-Wrestrict, falsely) on "," + string
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

}  // namespace deltagen
