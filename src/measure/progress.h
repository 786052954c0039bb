// One status line on stderr, rewritten in place while a long measurement
// runs; silent unless enabled (the CLI enables it only when stderr is a
// terminal, so logs and pipes stay clean).
#pragma once
#include <cstdio>
#include <string>

#include "measure/meters.h"

namespace deltagen::measure {

class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled) {}
  ~Progress() { done(); }

  // Shows `line`, at most ten times a second unless `force`.
  void show(const std::string& line, bool force = false) {
    if (!enabled_) return;
    const double t = now_seconds();
    if (!force && t - last_ < 0.1) return;
    last_ = t;
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  // Clears the line.
  void done() {
    if (!shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
  double last_ = 0;
};

}  // namespace deltagen::measure
