// A tiny fork-join helper for the builder's CPU-heavy steps (quantization,
// dtype conversion, transposes): the work is split into contiguous ranges,
// one per std::thread, so results never depend on the thread count.
#pragma once
#include <cstdint>
#include <functional>

namespace deltagen::quant {

// The number of threads a build uses when the caller asks for 0: all cores.
int default_thread_count();

// Calls body(begin, end) over [0, n) split into at most `threads` contiguous
// ranges of at least `min_chunk` items, on that many threads (the calling
// thread runs the first range). The first exception thrown by any range is
// rethrown after all of them have finished.
void parallel_for(int64_t n, int threads, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& body);

}  // namespace deltagen::quant
