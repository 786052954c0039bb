// KernelOptions (deltagen/options.h) on their way to a session: the
// environment's overrides, the checks, the session config entries, and the
// choice reaching the model actually loaded.
#include <gtest/gtest.h>

#include <cstdlib>

#include "deltagen/error.h"
#include "ortext/deltagen_ops.h"
#include "runtime/kernel_options.h"
#include "runtime_fixtures.h"

namespace deltagen {
namespace {

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

std::string resolve_error(const KernelOptions& options) {
  try {
    resolved_kernel_options(options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KernelOptions, EnvironmentOverridesTheSetAndCapsTheIsa) {
  EXPECT_EQ(resolved_kernel_options({}).set, KernelSet::Deltagen);
  {
    ScopedEnv env("DELTAGEN_KERNELS", "ort");
    EXPECT_EQ(resolved_kernel_options({.set = KernelSet::DeltagenOps}).set, KernelSet::Ort);
  }
  {
    ScopedEnv env("DELTAGEN_KERNEL_ISA", "avx2");
    EXPECT_EQ(resolved_kernel_options({}).max_isa, "avx2");
    EXPECT_EQ(resolved_kernel_options({.max_isa = "scalar"}).max_isa, "scalar");  // a cap, never an upgrade
    EXPECT_EQ(resolved_kernel_options({.max_isa = "amx"}).max_isa, "avx2");
  }
  EXPECT_EQ(resolved_kernel_options({.max_isa = "avx512"}).max_isa, "avx512");
}

TEST(KernelOptions, BadValuesAreOneLineErrorsNamingTheField) {
  EXPECT_EQ(resolve_error({.max_isa = "sse9"}), "kernels.max_isa: expected scalar, avx2, avx512 or amx, not 'sse9'");
  EXPECT_EQ(resolve_error({.amx_min_rows = -1}), "kernels.amx_min_rows: must not be negative");
  EXPECT_EQ(resolve_error({.prefetch = "l3:64"}), "kernels.prefetch: expected l1:BYTES or l2:BYTES, not 'l3:64'");
  ScopedEnv env("DELTAGEN_KERNEL_ISA", "fastest");
  EXPECT_EQ(resolve_error({}), "DELTAGEN_KERNEL_ISA: expected scalar, avx2, avx512 or amx, not 'fastest'");
}

TEST(KernelOptions, OnlyChangedSwitchesBecomeSessionConfigEntries) {
  EXPECT_TRUE(kernel_session_config({}).empty());
  const SessionConfig all = kernel_session_config(
      {.max_isa = "avx2", .amx_min_rows = 64, .compact_scales = false, .huge_pages = false, .prefetch = "l1:4096"});
  const SessionConfig want = {{ortext::kConfigMaxLevel, "avx2"},
                              {ortext::kConfigAmxMinRows, "64"},
                              {ortext::kConfigCompactScales, "0"},
                              {ortext::kConfigHugePages, "0"},
                              {ortext::kConfigPrefetch, "l1:4096"}};
  EXPECT_EQ(all, want);
  EXPECT_TRUE(kernel_session_config({.set = KernelSet::Ort, .max_isa = "avx2"}).empty());
}

TEST(KernelOptions, TheSetDecidesWhichKernelsTheModelRunsOn) {
  const auto& dir = test::golden_model_dir();
  auto fused = Model::load(dir, {.intra_op_threads = 1});
  auto per_op = Model::load(dir, {.intra_op_threads = 1, .kernels = {.set = KernelSet::DeltagenOps}});
  auto stock = Model::load(dir, {.intra_op_threads = 1, .kernels = {.set = KernelSet::Ort}});
  EXPECT_GT(fused->fast_kernel_nodes(), 0);
  EXPECT_GT(per_op->fast_kernel_nodes(), 0);
  EXPECT_EQ(stock->fast_kernel_nodes(), 0);
  ScopedEnv env("DELTAGEN_KERNELS", "ort");
  EXPECT_EQ(Model::load(dir, {.intra_op_threads = 1})->fast_kernel_nodes(), 0);
  EXPECT_THROW(Model::load(dir, {.kernels = {.max_isa = "sse9"}}), Error);
}

}  // namespace
}  // namespace deltagen
