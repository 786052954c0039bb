// What memory this machine has free for a long job: the builder refuses
// work it predicts will not fit, before it starts.
#pragma once
#include <cstdint>
#include <string>

namespace deltagen {

// MemAvailable of /proc/meminfo (what can be had without swapping), or the
// physical memory where that is unknown.
int64_t available_memory_bytes();

// "5.3 GB" or "85 MB" (decimal units): a memory size for a message.
std::string memory_text(int64_t bytes);

}  // namespace deltagen
