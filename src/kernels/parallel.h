// How a kernel spreads its tasks over threads. Inside ONNX Runtime this is the
// session's intra-op pool (ortext/); elsewhere (benchmarks, tests) a
// ThreadPool (thread_pool.h) or plain serial execution.
#pragma once
#include <cstddef>
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

}  // namespace deltagen::kernels
