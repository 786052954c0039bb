// How a kernel spreads its tasks over threads. Inside ONNX Runtime this is the
// session's intra-op pool (ortext/); elsewhere (benchmarks, tests) a
// ThreadPool (thread_pool.h) or plain serial execution.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace deltagen::kernels {

class Parallel {
 public:
  virtual ~Parallel() = default;
  // Calls task(i) once for every i in [0, count), possibly concurrently and in
  // any order; returns when all calls have returned. Tasks must not throw.
  virtual void run(size_t count, const std::function<void(size_t)>& task) const = 0;
};

class SerialParallel final : public Parallel {
 public:
  void run(size_t count, const std::function<void(size_t)>& task) const override {
    for (size_t i = 0; i < count; ++i) task(i);
  }
};

// body(i0, i1) over [0, count) in ranges of `per_task`, one task each; a
// single range runs on the calling thread without touching the pool.
template <typename Body>
void for_each_range(int64_t count, int64_t per_task, const Parallel& parallel, Body body) {
  if (count <= 0) return;
  per_task = std::max<int64_t>(1, per_task);
  const int64_t tasks = (count + per_task - 1) / per_task;
  auto run = [&](size_t t) {
    const int64_t i0 = int64_t(t) * per_task;
    body(i0, std::min(count, i0 + per_task));
  };
  if (tasks == 1)
    run(0);
  else
    parallel.run(size_t(tasks), run);
}

}  // namespace deltagen::kernels
