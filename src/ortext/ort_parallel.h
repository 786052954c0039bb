// kernels::Parallel on the session's intra-op thread pool (OrtApi
// KernelContext_ParallelFor; serial when the pool has one thread).
#pragma once
#include <functional>

#include <onnxruntime_cxx_api.h>

#include "kernels/parallel.h"

namespace deltagen::ortext {

class OrtParallel final : public kernels::Parallel {
 public:
  explicit OrtParallel(const Ort::KernelContext& ctx) : ctx_(ctx) {}
  void run(size_t count, const std::function<void(size_t)>& task) const override {
    if (count == 0) return;
    if (count == 1) {
      task(0);
      return;
    }
    auto trampoline = [](void* user, size_t i) { (*static_cast<const std::function<void(size_t)>*>(user))(i); };
    ctx_.ParallelFor(trampoline, count, 0, const_cast<std::function<void(size_t)>*>(&task));
  }

 private:
  const Ort::KernelContext& ctx_;
};

}  // namespace deltagen::ortext
