// How every kernel family picks its instruction set: one table of function
// pointers per KernelLevel.
//
// Each family (matmul_nbits, gated_delta_net, causal_conv, attention,
// swiglu, rms_norm, quantize_activations) declares a struct of function
// pointers whose first member says which instruction set its functions were
// compiled for. Each per-ISA translation unit (foo_avx2.cpp, foo_avx512.cpp,
// built with those flags in CMakeLists.txt) defines one such table; the
// family's KernelFamily lists a table for every level. A level without its own
// code points at the table of a lower level (a documented fallback, never a
// higher one: that would run instructions the CPU may not have).
//
// Why tables, and not per-ISA files picked by ternaries or a copied
// `std::min(level, supported_level())` in each kernel: the choice is made in
// one place (KernelFamily::at), the per-ISA code stays in files whose flags
// allow it (only they see -mavx512f, so baseline code never carries wide
// instructions), and a test can walk every family and see that each level has
// a complete table that is safe at that level (kernel_dispatch_test.cpp).
//
// The level: kernels take a KernelLevel argument that defaults to
// default_level() (this CPU's best, capped once per process by
// DELTAGEN_KERNEL_ISA). Tests and session options pass a lower one; at()
// lowers any request to what the CPU supports, so asking for AMX on an AVX2
// machine is safe.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>

#include "kernels/cpu_features.h"

namespace deltagen::kernels {

inline constexpr size_t kKernelLevelCount = 4;  // Scalar, Avx2, Avx512, Amx

// `cap`, lowered to what this CPU and OS support.
inline KernelLevel usable_level(KernelLevel cap) { return std::min(cap, supported_level()); }

template <typename Table>
struct KernelFamily {
  const char* name;
  std::array<const Table*, kKernelLevelCount> by_level;  // indexed by KernelLevel

  // The table a call at `cap` runs with.
  const Table& at(KernelLevel cap) const { return *by_level[size_t(usable_level(cap))]; }
  // The table listed for `level`, whether or not this CPU can run it (tests).
  const Table* listed(KernelLevel level) const { return by_level[size_t(level)]; }
};

}  // namespace deltagen::kernels
