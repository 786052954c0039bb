#include "kernels/thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DELTAGEN_PAUSE() _mm_pause()
#else
#define DELTAGEN_PAUSE() ((void)0)
#endif

namespace deltagen::kernels {
namespace {
// How long an idle worker spins before it sleeps, and how long the caller
// spins on stragglers before yielding its core to them (on an oversubscribed
// machine a descheduled worker only comes back if someone yields).
constexpr auto kWorkerSpin = std::chrono::microseconds(100);
constexpr auto kCallerSpin = std::chrono::microseconds(20);
using Clock = std::chrono::steady_clock;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::drain() const {
  for (size_t i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) (*task_)(i);
}

void ThreadPool::run(size_t count, const std::function<void(size_t)>& task) const {
  if (count == 0) return;
  if (workers_.empty() || count == 1) {
    for (size_t i = 0; i < count; ++i) task(i);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  task_ = &task;
  count_ = count;
  next_.store(0);
  busy_.store(int(workers_.size()));
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain();
  const auto spin_until = Clock::now() + kCallerSpin;
  while (busy_.load(std::memory_order_acquire) != 0) {
    if (Clock::now() < spin_until)
      DELTAGEN_PAUSE();
    else
      std::this_thread::yield();
  }
  task_ = nullptr;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    const auto spin_until = Clock::now() + kWorkerSpin;
    while (generation_.load(std::memory_order_acquire) == seen && Clock::now() < spin_until) DELTAGEN_PAUSE();
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    drain();
    busy_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace deltagen::kernels
