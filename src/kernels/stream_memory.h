// Memory that every decode step streams through -- the packed weights (423 MB
// per step on the 0.8B model) and the runtime's state buffers (linear-attention
// states, KV cache) -- on transparent huge pages where the OS gives them.
//
// On 4 KiB pages a stream takes a TLB miss, in a VM a two-level page walk,
// every 4 KiB, and the hardware prefetchers stop at each page boundary; 2 MiB
// pages take both away (docs/performance.md 1.14). Blocks are placed one
// after the other in large regions advised MADV_HUGEPAGE, so blocks smaller
// than 2 MiB (a 0.8B model has 48 matrices of 1.2 MB, and 1 MiB layer states)
// share huge pages instead of each rounding up to its own. A region is
// unmapped when its last block is released; pages are backed when first
// written, so RSS is what is used. Space of a released block is not reused
// while its region lives (blocks are placed by bumping a pointer): a process
// that loads and unloads models keeps at most one region's worth of such
// space per region still in use.
//
// Under AddressSanitizer every block is its own heap allocation instead, so
// out-of-bounds accesses stay detectable.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace deltagen::kernels {

enum class PageSize {
  Huge,   // shared regions advised MADV_HUGEPAGE (the default)
  Small,  // one aligned heap allocation per block: 4 KiB pages
};

// Zeroed, 64-byte-aligned memory for `bytes` bytes, valid while the returned
// pointer (or a copy) lives. Throws std::bad_alloc when out of memory.
std::shared_ptr<uint8_t> allocate_stream_memory(size_t bytes, PageSize pages);

}  // namespace deltagen::kernels
