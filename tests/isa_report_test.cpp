// Which kernel levels this machine runs, printed once per test run so that a
// CI log says which instruction sets the kernel tests covered (a kernel test
// that could not run a level reports itself skipped: tests/kernel_levels.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "kernels/cpu_features.h"

namespace deltagen::kernels {
namespace {

TEST(IsaReport, KernelLevelsOnThisMachine) {
  const CpuFeatures& f = cpu_features();
  std::string ran, not_run;
  for (KernelLevel level : {KernelLevel::Scalar, KernelLevel::Avx2, KernelLevel::Avx512, KernelLevel::Amx}) {
    std::string& list = level <= supported_level() ? ran : not_run;
    list += (list.empty() ? "" : " ") + std::string(level_name(level));
  }
  std::printf("[ ISA      ] kernel levels tested: %s; not tested (the CPU lacks them): %s; default %s\n", ran.c_str(),
              not_run.empty() ? "none" : not_run.c_str(), level_name(default_level()));
  std::printf("[ ISA      ] avx2 %d fma %d f16c %d avx512 %d avx512_vnni %d avx512_bf16 %d amx_bf16 %d amx_int8 %d "
              "amx_permitted %d avx_vnni %d\n",
              f.avx2, f.fma, f.f16c, f.avx512, f.avx512_vnni, f.avx512_bf16, f.amx_bf16, f.amx_int8, f.amx_permitted,
              f.avx_vnni);
  RecordProperty("kernel_levels_tested", ran);
  RecordProperty("kernel_levels_not_tested", not_run);
  EXPECT_EQ(ran.rfind("scalar", 0), 0u);  // the portable kernels run everywhere
}

}  // namespace
}  // namespace deltagen::kernels
