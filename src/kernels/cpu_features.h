// What this CPU (and the OS) lets the kernels use, detected once
// with CPUID/XGETBV. Compiled for baseline x86-64 so the program still starts
// on CPUs without AVX: only the per-ISA kernel files use wider instructions,
// and only after this says they are safe.
#pragma once
#include <optional>
#include <string_view>

namespace deltagen::kernels {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;       // with OS-enabled YMM state
  bool avx512 = false;                                  // F + BW + VL + DQ, OS-enabled ZMM state
  bool avx512_vnni = false, avx512_bf16 = false;
  bool avx_vnni = false;  // VEX-encoded VPDPBUSD on YMM (AVX2 tables only)
  bool amx_bf16 = false, amx_int8 = false;              // CPUID and OS-enabled tile state
  bool amx_permitted = false;  // Linux granted this process the tile data state (arch_prctl)
};

// Detected on first call (which also asks Linux for AMX permission when the
// CPU has AMX). Thread-safe.
const CpuFeatures& cpu_features();

// The instruction-set levels, from slowest to fastest. Each level needs the
// ones below. Every kernel family has a table per level (dispatch.h).
enum class KernelLevel {
  Scalar = 0,  // portable C++
  Avx2 = 1,    // AVX2 + FMA + F16C
  Avx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI: int8 dot products for small M
  Amx = 3,     // + AMX-BF16 tiles (and AVX512-BF16) for large M
};

const char* level_name(KernelLevel level);  // "scalar", "avx2", "avx512", "amx"
std::optional<KernelLevel> parse_level(std::string_view name);

// The best level this machine supports.
KernelLevel supported_level();
// supported_level(), capped by DELTAGEN_KERNEL_ISA=scalar|avx2|avx512|amx when
// set (a cap, never an upgrade). Read once.
KernelLevel default_level();

}  // namespace deltagen::kernels
