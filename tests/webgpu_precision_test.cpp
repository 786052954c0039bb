// The fp16 and q4f16 builds of tiny-a on WebGPU: they run, and they stay as
// close to the fp32 build (on WebGPU too) as a bound measured here allows.
// The same distance on the CPU is printed beside it for contrast: the two
// providers round differently, so the numbers may differ.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "measure/compare.h"
#include "measure/corpus.h"
#include "runtime/generator.h"
#include "webgpu_fixtures.h"

namespace deltagen {
namespace {

using test::kMaxLength;
using test::loaded;

// A LogitSource over a model loaded once per process (measure::onnx_source
// would load a session of its own: seconds each on WebGPU).
class SharedModelSource : public measure::LogitSource {
 public:
  SharedModelSource(Model& model, std::string name) : model_(model), name_(std::move(name)), gen_(model, 1, kMaxLength) {}
  std::string name() const override { return name_; }
  int64_t vocab() const override { return model_.vocab_size(); }
  int64_t context_length() const override { return gen_.max_length(); }
  void reset() override { gen_.reset(); }
  void feed(std::span<const int64_t> ids, std::vector<double>& logits) override {
    const Logits l = gen_.forward(ids, true);
    logits.assign(l.data.begin(), l.data.end());
  }
  std::vector<int64_t> greedy(std::span<const int64_t> prompt, int64_t new_tokens) override {
    gen_.reset();
    return generate_greedy(gen_, prompt, GenerateOptions{.max_new_tokens = new_tokens}).generated_ids;
  }

 private:
  Model& model_;
  std::string name_;
  Generator gen_;
};

// Teacher-forced KL(fp32 || build) over 128 pseudo-random ids in windows of
// 64 (compare_test's corpus and windows), plus a 32-token greedy run.
measure::CompareReport versus_fp32(const std::filesystem::path& build, ExecutionProvider ep) {
  Model* fp32 = loaded(test::fp32_dir(), ep);
  if (!fp32) return {};
  Model* other = loaded(build, ep);
  if (!other) return {};
  SharedModelSource a(*fp32, "fp32"), b(*other, build.filename().string());
  measure::CompareOptions o;
  o.context = 64;
  o.chunk = 24;
  o.greedy_prompt = 8;
  o.greedy_tokens = 32;
  o.threads = 1;
  return measure::compare_sources(a, b, measure::pseudo_random_ids(128, a.vocab(), 3), o);
}

struct OnBoth {
  measure::Fidelity webgpu, cpu;
};

// `build` against fp32 on WebGPU and on the CPU, printed and recorded.
OnBoth measure_both(const std::filesystem::path& build) {
  const measure::CompareReport gpu = versus_fp32(build, ExecutionProvider::WebGpu);
  const measure::CompareReport cpu = versus_fp32(build, ExecutionProvider::Cpu);
  std::printf("%s vs fp32: mean KL %.3g (webgpu) %.3g (cpu), top-1 %.4f (webgpu) %.4f (cpu), "
              "greedy agreement %lld/%lld (webgpu) %lld/%lld (cpu)\n",
              build.filename().c_str(), gpu.fidelity.kl_mean, cpu.fidelity.kl_mean, gpu.fidelity.top1_agreement,
              cpu.fidelity.top1_agreement, (long long)gpu.greedy_agree, (long long)gpu.greedy_tokens,
              (long long)cpu.greedy_agree, (long long)cpu.greedy_tokens);
  auto record = [](const char* key, double value) {  // %g: std::to_string would round a small KL to 0.000006
    char text[32];
    std::snprintf(text, sizeof text, "%.4g", value);
    ::testing::Test::RecordProperty(key, text);
  };
  record("kl_mean_webgpu", gpu.fidelity.kl_mean);
  record("kl_mean_cpu", cpu.fidelity.kl_mean);
  record("top1_webgpu", gpu.fidelity.top1_agreement);
  record("top1_cpu", cpu.fidelity.top1_agreement);
  return {gpu.fidelity, cpu.fidelity};
}

// Measured on lavapipe (126 scored positions): mean KL 9.6e-5 nats on
// WebGPU, 6.1e-6 on the CPU (presumably WebGPU's kernels compute in fp16
// where the CPU provider, short of fp16 kernels, casts to fp32), top-1 100 %
// on both, all 32 greedy tokens equal. Bounds: 5x the KL, at most 2 of 126 argmax flips, for another
// adapter's rounding.
TEST(WebGpuPrecision, Fp16StaysCloseToFp32) {
  const OnBoth m = measure_both(test::fp16_dir());
  ASSERT_FALSE(HasFailure());
  EXPECT_GT(m.webgpu.kl_mean, 0) << "fp16 must change something";
  EXPECT_LT(m.webgpu.kl_mean, 5e-4);
  EXPECT_GE(m.webgpu.top1_agreement, 0.98);
}

// Measured: mean KL 0.123 nats on WebGPU, 0.124 on the CPU; top-1 54.0 % and
// 54.8 %. int4 weights are far from tiny-a's random fp32 ones, and the two
// providers agree to 1 %: the quantization sets these numbers, not WebGPU.
// Bounds: 2x the KL, top-1 above 40 %, and WebGPU's KL within 20 % of the
// CPU's (a WebGPU int4 kernel that went wrong would leave the CPU's far behind).
TEST(WebGpuPrecision, Q4f16StaysCloseToFp32) {
  const OnBoth m = measure_both(test::q4f16_dir());
  ASSERT_FALSE(HasFailure());
  EXPECT_GT(m.webgpu.kl_mean, 0);
  EXPECT_LT(m.webgpu.kl_mean, 0.25);
  EXPECT_GE(m.webgpu.top1_agreement, 0.40);
  EXPECT_NEAR(m.webgpu.kl_mean, m.cpu.kl_mean, 0.2 * m.cpu.kl_mean);
}

}  // namespace
}  // namespace deltagen
