#include "quant/parallel.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace deltagen::quant {

int default_thread_count() { return std::max(1, int(std::thread::hardware_concurrency())); }

void parallel_for(int64_t n, int threads, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  if (threads <= 0) threads = default_thread_count();
  const int64_t by_size = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int64_t parts = std::min<int64_t>(threads, by_size);
  if (parts <= 1) {
    body(0, n);
    return;
  }
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto run = [&](int64_t part) {
    const int64_t begin = n * part / parts, end = n * (part + 1) / parts;
    try {
      body(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (int64_t part = 1; part < parts; ++part) workers.emplace_back(run, part);
  run(0);
  for (auto& w : workers) w.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace deltagen::quant
