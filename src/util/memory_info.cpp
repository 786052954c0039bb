#include "util/memory_info.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace deltagen {

int64_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kb = 0;
    if (fields >> key >> kb && key == "MemAvailable:") return kb * 1024;
  }
  return int64_t(::sysconf(_SC_PHYS_PAGES)) * int64_t(::sysconf(_SC_PAGESIZE));
}

std::string memory_text(int64_t bytes) {
  char text[32];
  if (bytes >= 1000000000) std::snprintf(text, sizeof text, "%.1f GB", double(bytes) / 1e9);
  else std::snprintf(text, sizeof text, "%.0f MB", double(bytes) / 1e6);
  return text;
}

}  // namespace deltagen
