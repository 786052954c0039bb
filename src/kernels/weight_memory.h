// Memory for packed weights, on transparent huge pages where the OS gives them.
//
// A decode step streams every packed weight byte once (423 MB on the 0.8B
// model). On 4 KiB pages that is a TLB miss, in a VM a two-level page walk,
// every 4 KiB, and the hardware prefetchers stop at each page boundary; 2 MiB
// pages take both away (docs/performance.md 1.14). Packed matrices are placed
// one after the other in large regions advised MADV_HUGEPAGE, so matrices
// smaller than 2 MiB (a 0.8B model has 48 of 1.2 MB) share huge pages instead
// of each rounding up to its own. A region is unmapped when its last matrix
// is released; pages are faulted in when first written, so RSS is what is used.
//
// Under AddressSanitizer every matrix gets its own heap block instead, so
// out-of-bounds reads stay detectable.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace deltagen::kernels {

enum class WeightPages {
  Huge,   // shared regions advised MADV_HUGEPAGE (the default)
  Small,  // one aligned heap block per matrix: 4 KiB pages
};

// Zeroed, 64-byte-aligned memory for `bytes` bytes, valid while the returned
// pointer (or a copy) lives. Throws Error when out of memory.
std::shared_ptr<uint8_t> allocate_weight_memory(size_t bytes, WeightPages pages);

}  // namespace deltagen::kernels
