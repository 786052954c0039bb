#include "runtime/kernel_options.h"

#include <cstdlib>
#include <string>

#include "deltagen/error.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul_nbits.h"
#include "ortext/deltagen_ops.h"

namespace deltagen {

const char* kernel_set_name(KernelSet set) {
  switch (set) {
    case KernelSet::Ort: return "ort";
    case KernelSet::DeltagenOps: return "deltagen-ops";
    case KernelSet::Deltagen: return "deltagen";
  }
  return "?";
}

KernelOptions resolved_kernel_options(KernelOptions options) {
  if (const char* v = std::getenv("DELTAGEN_KERNELS"); v && std::string(v) == "ort") options.set = KernelSet::Ort;
  if (!options.max_isa.empty() && !kernels::parse_level(options.max_isa))
    fail("kernels.max_isa", "expected scalar, avx2, avx512 or amx, not '" + options.max_isa + "'");
  if (const char* v = std::getenv("DELTAGEN_KERNEL_ISA"); v && *v) {
    const auto cap = kernels::parse_level(v);
    if (!cap) fail("DELTAGEN_KERNEL_ISA", std::string("expected scalar, avx2, avx512 or amx, not '") + v + "'");
    if (options.max_isa.empty() || *cap < *kernels::parse_level(options.max_isa)) options.max_isa = v;
  }
  if (options.amx_min_rows < 0) fail("kernels.amx_min_rows", "must not be negative");
  if (!options.prefetch.empty() && !kernels::parse_prefetch(options.prefetch))
    fail("kernels.prefetch", "expected l1:BYTES or l2:BYTES, not '" + options.prefetch + "'");
  return options;
}

SessionConfig kernel_session_config(const KernelOptions& options) {
  SessionConfig entries;
  if (options.set == KernelSet::Ort) return entries;
  if (!options.max_isa.empty()) entries.emplace_back(ortext::kConfigMaxLevel, options.max_isa);
  if (options.amx_min_rows > 0) entries.emplace_back(ortext::kConfigAmxMinRows, std::to_string(options.amx_min_rows));
  if (!options.compact_scales) entries.emplace_back(ortext::kConfigCompactScales, "0");
  if (!options.huge_pages) entries.emplace_back(ortext::kConfigHugePages, "0");
  if (!options.prefetch.empty()) entries.emplace_back(ortext::kConfigPrefetch, options.prefetch);
  return entries;
}

}  // namespace deltagen
