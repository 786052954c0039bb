// A small persistent thread pool for running kernels outside ONNX Runtime
// (benchmarks, tests). The caller takes part, so ThreadPool(2) starts one
// worker. Idle workers spin briefly (100 µs) before sleeping: a decode step
// issues hundreds of sub-millisecond matmuls back to back, and waking a
// sleeping thread costs tens of microseconds each time.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/parallel.h"

namespace deltagen::kernels {

class ThreadPool final : public Parallel {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool() override;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }
  // One run at a time (calls from several threads are serialized).
  void run(size_t count, const std::function<void(size_t)>& task) const override;

 private:
  void worker_loop();
  void drain() const;  // take task indices until none are left

  std::vector<std::thread> workers_;
  mutable std::mutex run_mutex_;  // serializes run()
  mutable std::mutex sleep_mutex_;
  mutable std::condition_variable wake_;
  mutable std::atomic<uint64_t> generation_{0};  // bumped per run; workers watch it
  mutable std::atomic<size_t> next_{0};
  mutable std::atomic<int> busy_{0};  // workers still inside the current run
  mutable size_t count_ = 0;
  mutable const std::function<void(size_t)>* task_ = nullptr;
  std::atomic<bool> stop_{false};
};

}  // namespace deltagen::kernels
