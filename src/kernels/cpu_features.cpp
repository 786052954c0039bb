#include "kernels/cpu_features.h"

#include <cpuid.h>
#include <cstdint>
#include <cstdlib>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace deltagen::kernels {
namespace {

struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

Regs cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return Regs{};
  return r;
}

// XCR0: which register states the OS saves on context switch. Executing
// XGETBV is only legal when CPUID says OSXSAVE.
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

bool bit(uint32_t value, int n) { return (value >> n) & 1u; }

// Linux (5.16+) only lets a process touch the 8 KiB AMX tile data state after
// asking for it; without this the first tile instruction kills the process.
bool request_amx_permission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr int kArchGetXcompPerm = 0x1022;
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long granted = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0) return false;
  return (granted >> kXfeatureXtiledata) & 1u;
#else
  return false;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  const Regs l1 = cpuid(1, 0);
  if (!bit(l1.ecx, 27)) return f;  // no OSXSAVE: no AVX state at all
  const uint64_t xcr0 = read_xcr0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;
  const bool os_tiles = (xcr0 & 0x60000) == 0x60000;

  const Regs l7 = cpuid(7, 0);
  const Regs l7s1 = cpuid(7, 1);
  f.fma = os_ymm && bit(l1.ecx, 12);
  f.f16c = os_ymm && bit(l1.ecx, 29);
  f.avx2 = os_ymm && bit(l1.ecx, 28) && bit(l7.ebx, 5);
  f.avx512 = os_zmm && bit(l7.ebx, 16) && bit(l7.ebx, 17) && bit(l7.ebx, 30) && bit(l7.ebx, 31);
  f.avx512_vnni = f.avx512 && bit(l7.ecx, 11);
  f.avx512_bf16 = f.avx512 && bit(l7s1.eax, 5);
  f.avx_vnni = f.avx2 && bit(l7s1.eax, 4);
  const bool amx_tile = os_tiles && bit(l7.edx, 24);
  f.amx_bf16 = amx_tile && bit(l7.edx, 22);
  f.amx_int8 = amx_tile && bit(l7.edx, 25);
  if (amx_tile) f.amx_permitted = request_amx_permission();
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

const char* level_name(KernelLevel level) {
  switch (level) {
    case KernelLevel::Scalar: return "scalar";
    case KernelLevel::Avx2: return "avx2";
    case KernelLevel::Avx512: return "avx512";
    case KernelLevel::Amx: return "amx";
  }
  return "?";
}

std::optional<KernelLevel> parse_level(std::string_view name) {
  for (KernelLevel l : {KernelLevel::Scalar, KernelLevel::Avx2, KernelLevel::Avx512, KernelLevel::Amx})
    if (name == level_name(l)) return l;
  return std::nullopt;
}

namespace {

KernelLevel detect_level() {
  const CpuFeatures& f = cpu_features();
  if (!(f.avx2 && f.fma && f.f16c)) return KernelLevel::Scalar;
  if (!(f.avx512 && f.avx512_vnni)) return KernelLevel::Avx2;
  if (!(f.amx_bf16 && f.amx_permitted && f.avx512_bf16)) return KernelLevel::Avx512;
  return KernelLevel::Amx;
}

}  // namespace

// Asked on every kernel call (KernelFamily::at): worked out once.
KernelLevel supported_level() {
  static const KernelLevel level = detect_level();
  return level;
}

KernelLevel default_level() {
  static const KernelLevel level = [] {
    KernelLevel best = supported_level();
    if (const char* env = std::getenv("DELTAGEN_KERNEL_ISA")) {
      if (auto cap = parse_level(env); cap && *cap < best) best = *cap;
    }
    return best;
  }();
  return level;
}

}  // namespace deltagen::kernels
