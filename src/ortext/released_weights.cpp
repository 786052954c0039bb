#include "ortext/released_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

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

size_t release_mapped_weight(const void* data, size_t bytes) {
  if (!data || bytes == 0) return 0;
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = uintptr_t(data), end = begin + bytes;
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last <= first || !inside_file_mapping(begin, end)) return 0;
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

}  // namespace deltagen::ortext
