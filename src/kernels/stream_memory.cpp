#include "kernels/stream_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

namespace deltagen::kernels {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
// Virtual size of one shared region: pages are only backed once written, so
// this costs address space, not memory. Larger blocks get a region each.
constexpr size_t kRegionBytes = size_t(256) << 20;
constexpr size_t kAlign = 64;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::shared_ptr<uint8_t> heap_block(size_t bytes) {
  const size_t rounded = round_up(std::max<size_t>(bytes, 1), kAlign);
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return std::shared_ptr<uint8_t>(p, [](uint8_t* q) { std::free(q); });
}

// A 2 MiB-aligned anonymous mapping (zero-filled by the OS), advised huge.
struct Region {
  uint8_t* base = nullptr;
  size_t size = 0;
  void* mapping = MAP_FAILED;
  size_t mapping_size = 0;

  ~Region() {
    if (mapping != MAP_FAILED) ::munmap(mapping, mapping_size);
  }
};

std::shared_ptr<Region> map_region(size_t size) {
  auto region = std::make_shared<Region>();
  region->mapping_size = size + kHugePage;  // room to align the start
  region->mapping = ::mmap(nullptr, region->mapping_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region->mapping == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(region->mapping);
  region->base = reinterpret_cast<uint8_t*>(round_up(start, kHugePage));
  region->size = size;
  // Best effort: without THP (or on a kernel that refuses) the pages are small.
  ::madvise(region->base, size, MADV_HUGEPAGE);
  return region;
}

class HugePageArena {
 public:
  std::shared_ptr<uint8_t> allocate(size_t bytes) {
    const size_t need = round_up(std::max<size_t>(bytes, 1), kAlign);
    if (need > kRegionBytes / 2) {  // the lm_head of a large vocabulary
      std::shared_ptr<Region> own = map_region(round_up(need, kHugePage));
      return own ? std::shared_ptr<uint8_t>(own, own->base) : nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    std::shared_ptr<Region> region = current_.lock();
    if (!region || used_ + need > region->size) {
      region = map_region(kRegionBytes);
      if (!region) return nullptr;
      current_ = region;
      used_ = 0;
    }
    uint8_t* p = region->base + used_;  // never handed out before: still zero
    used_ += need;
    // Aliasing constructor: the block keeps its region mapped.
    return std::shared_ptr<uint8_t>(region, p);
  }

 private:
  std::mutex mutex_;
  std::weak_ptr<Region> current_;  // does not keep a released region alive
  size_t used_ = 0;
};

}  // namespace

std::shared_ptr<uint8_t> allocate_stream_memory(size_t bytes, PageSize pages) {
#if defined(__SANITIZE_ADDRESS__)
  pages = PageSize::Small;
#endif
  if (pages == PageSize::Huge) {
    static HugePageArena arena;
    if (std::shared_ptr<uint8_t> p = arena.allocate(bytes)) return p;
  }
  return heap_block(bytes);  // also when the mapping failed
}

}  // namespace deltagen::kernels
