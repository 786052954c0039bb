// Every kernel family has a complete table at every KernelLevel, and none
// hands a level code built for a higher one (dispatch.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <iterator>
#include <string>

#include "kernels/attention.h"
#include "kernels/causal_conv.h"
#include "kernels/dispatch.h"
#include "kernels/gated_delta_net.h"
#include "kernels/gemm_f32.h"
#include "kernels/kernel_impls.h"
#include "kernels/quantize_activations.h"
#include "kernels/rms_norm.h"
#include "kernels/swiglu.h"

namespace deltagen::kernels {
namespace {

constexpr KernelLevel kAllLevels[] = {KernelLevel::Scalar, KernelLevel::Avx2, KernelLevel::Avx512, KernelLevel::Amx};

// `complete(table)`: every function the family's dispatcher may call is set.
template <typename Table, typename Complete>
void expect_every_level_served(const KernelFamily<Table>& family, Complete complete) {
  SCOPED_TRACE(family.name);
  for (KernelLevel level : kAllLevels) {
    const Table* table = family.listed(level);
    ASSERT_NE(table, nullptr) << level_name(level);
    EXPECT_LE(table->isa, level) << level_name(level) << " would run " << level_name(table->isa) << " code";
    EXPECT_TRUE(complete(*table)) << level_name(level);
    if (table->isa < level)  // a documented fallback (the family's header says why)
      std::printf("[ fallback ] %s at %s runs the %s table\n", family.name, level_name(level), level_name(table->isa));
    // What a call at this level gets on this CPU: never above what it supports.
    EXPECT_LE(family.at(level).isa, supported_level());
  }
  // The levels only ever go up along the list: a higher cap never gets slower code.
  for (size_t i = 1; i < std::size(kAllLevels); ++i)
    EXPECT_LE(family.listed(kAllLevels[i - 1])->isa, family.listed(kAllLevels[i])->isa);
}

TEST(KernelDispatch, EveryFamilyHasATableAtEveryLevel) {
  expect_every_level_served(kMatMulFamily, [](const MatMulKernels& t) {
    // The tile path is AMX's alone; the others lack it on purpose.
    return t.gemm_q8 && (t.isa == KernelLevel::Amx) == (t.gemm_bf16 && t.convert_rows_bf16);
  });
  expect_every_level_served(kGatedDeltaFamily, [](const GatedDeltaKernels& t) {
    return t.conv && t.silu && t.heads && t.widen && t.narrow;
  });
  expect_every_level_served(kCausalConvFamily, [](const CausalConvKernels& t) { return t.decode && t.prefill; });
  expect_every_level_served(kAttentionFamily, [](const AttentionKernels& t) { return t.attend != nullptr; });
  expect_every_level_served(kSwigluFamily, [](const SwigluKernels& t) { return t.rows != nullptr; });
  expect_every_level_served(kRmsNormFamily, [](const RmsNormKernels& t) { return t.row != nullptr; });
  expect_every_level_served(kQuantizeFamily, [](const QuantizeKernels& t) { return t.row != nullptr; });
  expect_every_level_served(kGemmF32Family, [](const GemmF32Kernels& t) { return t.block && t.panel > 0; });
}

// The families that have their own code at a level list it there (the AVX2
// paths filled in for attention, SwiGLU and the quantizer among them).
TEST(KernelDispatch, LevelsWithTheirOwnCode) {
  auto own = [](auto& family, KernelLevel level) { return family.listed(level)->isa == level; };
  for (KernelLevel level : {KernelLevel::Avx2, KernelLevel::Avx512}) {
    EXPECT_TRUE(own(kMatMulFamily, level)) << level_name(level);
    EXPECT_TRUE(own(kGatedDeltaFamily, level)) << level_name(level);
    EXPECT_TRUE(own(kAttentionFamily, level)) << level_name(level);
    EXPECT_TRUE(own(kSwigluFamily, level)) << level_name(level);
    EXPECT_TRUE(own(kQuantizeFamily, level)) << level_name(level);
    EXPECT_TRUE(own(kGemmF32Family, level)) << level_name(level);
  }
  EXPECT_TRUE(own(kMatMulFamily, KernelLevel::Amx));
}

// A cap above the CPU is lowered to it; a cap below it is kept.
TEST(KernelDispatch, TheCapIsLoweredToWhatTheCpuSupports) {
  EXPECT_EQ(usable_level(KernelLevel::Amx), supported_level());
  EXPECT_EQ(usable_level(KernelLevel::Scalar), KernelLevel::Scalar);
  EXPECT_EQ(&kSwigluFamily.at(KernelLevel::Scalar), &kSwigluScalar);
  EXPECT_LE(default_level(), supported_level());
}

}  // namespace
}  // namespace deltagen::kernels
