// Which kernel levels (instruction sets) a test can run on this machine.
// Kernel tests loop over every level and leave out the ones the CPU lacks;
// runs_here() makes that visible: each level left out prints a line in the
// test's output and is recorded as a test property, so a log from a machine
// without AVX-512 or AMX says what was not tested instead of passing quietly.
// (IsaReport.KernelLevelsOnThisMachine lists them once per run.)
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "kernels/cpu_features.h"

namespace deltagen::test {

inline bool runs_here(kernels::KernelLevel level) {
  if (level <= kernels::supported_level()) return true;
  const std::string name = kernels::level_name(level);
  std::printf("[ NOT RUN  ] the %s kernels: this CPU does not have %s\n", name.c_str(), name.c_str());
  ::testing::Test::RecordProperty("not_run_" + name, "not on this CPU");
  return false;
}

}  // namespace deltagen::test
