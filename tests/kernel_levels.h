// The kernel levels a per-ISA test asks for, split into those this CPU can
// run and those it cannot. A test runs the first and ends with
// SKIP_LEVELS_THIS_CPU_LACKS, so a machine without (say) AVX-512 reports the
// test as skipped, naming the levels, instead of passing it silently.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"

namespace deltagen::test {

struct LevelsUnderTest {
  std::vector<kernels::KernelLevel> runnable, skipped;

  LevelsUnderTest(std::initializer_list<kernels::KernelLevel> wanted) {
    for (kernels::KernelLevel level : wanted)
      (level <= kernels::supported_level() ? runnable : skipped).push_back(level);
  }

  std::string skip_reason() const {
    std::string names;
    for (kernels::KernelLevel level : skipped) names += std::string(names.empty() ? "" : ", ") + kernels::level_name(level);
    return "not run at " + names + ": this CPU supports up to " + kernels::level_name(kernels::supported_level()) +
           " (the lower levels ran)";
  }
};

}  // namespace deltagen::test

// Last statement of a test body (GTEST_SKIP returns from it). A failure
// earlier in the test still fails it.
#define SKIP_LEVELS_THIS_CPU_LACKS(levels) \
  if (!(levels).skipped.empty()) GTEST_SKIP() << (levels).skip_reason()
