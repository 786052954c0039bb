// Giving back the resident pages of a read-only file mapping a program has
// finished reading (a checkpoint's tensors while building, a model's weights
// once packed): madvise(MADV_DONTNEED) on the whole pages inside the range.
// The bytes stay in the page cache and fault back in if read again; only
// call it on file-backed memory (anonymous pages would read back as zeros).
#pragma once
#include <cstddef>

namespace deltagen {

// Returns the bytes of whole pages given back (0 when the range holds none).
size_t drop_mapped_pages(const void* data, size_t bytes);

}  // namespace deltagen
