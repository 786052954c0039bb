#include "ortext/released_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "util/mapped_pages.h"

namespace deltagen::ortext {
namespace {

// Whether [begin, end) lies inside one mapping of a file (an inode other than 0).
bool inside_file_mapping(uintptr_t begin, uintptr_t end) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0, offset = 0, inode = 0;
    char perms[8] = {}, dev[16] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s %lx %15s %lu", &lo, &hi, perms, &offset, dev, &inode) != 6) continue;
    if (begin >= lo && end <= hi) return inode != 0;
  }
  return false;
}

}  // namespace

size_t release_clean_file_pages(const std::filesystem::path& data_file) {
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::canonical(data_file, ec);
  if (ec) return 0;
  struct Mapping {
    uintptr_t lo = 0, hi = 0;
    bool ours = false;
    long rss_kb = 0, dirty_kb = -1;
  };
  std::vector<Mapping> mappings;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) >= 3 && path_at > 0 &&
        line.find(':') != std::string::npos && line.find("kB") == std::string::npos) {
      std::string path = line.substr(size_t(path_at));
      mappings.push_back({lo, hi, path == target.string()});
      continue;
    }
    if (mappings.empty()) continue;
    long kb = 0;
    if (std::sscanf(line.c_str(), "Rss: %ld kB", &kb) == 1) mappings.back().rss_kb = kb;
    else if (std::sscanf(line.c_str(), "Private_Dirty: %ld kB", &kb) == 1) mappings.back().dirty_kb = kb;
  }
  size_t dropped = 0;
  for (const Mapping& m : mappings) {
    if (!m.ours || m.dirty_kb != 0) continue;
    ::madvise(reinterpret_cast<void*>(m.lo), m.hi - m.lo, MADV_RANDOM);
    if (m.rss_kb == 0) continue;
    if (::madvise(reinterpret_cast<void*>(m.lo), m.hi - m.lo, MADV_DONTNEED) == 0) dropped += size_t(m.rss_kb) * 1024;
  }
  return dropped;
}

size_t release_mapped_weight(const void* data, size_t bytes) {
  if (!data || bytes == 0 || !inside_file_mapping(uintptr_t(data), uintptr_t(data) + bytes)) return 0;
  return drop_mapped_pages(data, bytes);
}

}  // namespace deltagen::ortext
