#include "util/mapped_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace deltagen {

size_t drop_mapped_pages(const void* data, size_t bytes) {
  if (!data || bytes == 0) return 0;
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (uintptr_t(data) + page - 1) / page * page;
  const uintptr_t end = (uintptr_t(data) + bytes) / page * page;
  if (end <= begin || ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED) != 0) return 0;
  return end - begin;
}

}  // namespace deltagen
