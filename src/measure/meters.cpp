#include "measure/meters.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

namespace deltagen::measure {

double clock_tick_seconds() {
  static const double tick = [] {
    long hz = ::sysconf(_SC_CLK_TCK);
    return hz > 0 ? 1.0 / double(hz) : 0.01;
  }();
  return tick;
}

CpuSample sample_cpu() {
  CpuSample s;
  s.wall = now_seconds();
  const double tick = clock_tick_seconds();
  {
    // First line: "cpu  user nice system idle iowait irq softirq steal guest guest_nice".
    // guest time is already included in user, so it is not added again.
    std::ifstream in("/proc/stat");
    std::string label;
    long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (in >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal && label == "cpu") {
      s.busy_all = double(user + nice + system + irq + softirq) * tick;
      s.steal_all = double(steal) * tick;
    }
  }
  {
    // Fields after "pid (comm) ": state is field 3, utime 14, stime 15. comm may
    // contain spaces and parentheses, so parse after the last ')'.
    std::ifstream in("/proc/self/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto close = text.rfind(')');
    if (close != std::string::npos) {
      std::istringstream rest(text.substr(close + 1));
      std::string field;
      long long utime = 0, stime = 0;
      for (int i = 3; i <= 15 && rest >> field; ++i) {
        if (i == 14) utime = std::stoll(field);
        if (i == 15) stime = std::stoll(field);
      }
      s.self = double(utime + stime) * tick;
    }
  }
  return s;
}

Interference interference_between(const CpuSample& begin, const CpuSample& end) {
  Interference m;
  m.wall_seconds = end.wall - begin.wall;
  const double self = end.self - begin.self;
  // The two files are read a moment apart and counted differently (global
  // ticks vs per-task accounting), so the difference can dip below 0.
  m.foreign_cpu_seconds = std::max(0.0, (end.busy_all - begin.busy_all) - self);
  if (m.wall_seconds > 0) {
    m.foreign_cpu_pct = 100.0 * m.foreign_cpu_seconds / m.wall_seconds;
    m.steal_pct = 100.0 * std::max(0.0, end.steal_all - begin.steal_all) / m.wall_seconds;
    m.self_cpu_pct = 100.0 * self / m.wall_seconds;
  }
  return m;
}

bool is_noisy(const Interference& m, double max_foreign_pct) {
  return m.foreign_cpu_pct > max_foreign_pct && m.foreign_cpu_seconds > 2.5 * clock_tick_seconds();
}

namespace {

int64_t status_kb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t kb = 0;
    fields >> kb;
    return kb;
  }
  return 0;
}

}  // namespace

int64_t peak_rss_bytes() { return status_kb("VmHWM") * 1024; }
int64_t current_rss_bytes() { return status_kb("VmRSS") * 1024; }

}  // namespace deltagen::measure
