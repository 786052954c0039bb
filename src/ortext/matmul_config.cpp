#include "ortext/matmul_config.h"

#include <algorithm>
#include <string>

#include "deltagen/error.h"
#include "ortext/deltagen_ops.h"

namespace deltagen::ortext {

void read_matmul_config(const Ort::ConstKernelInfo& info, kernels::MatMulConfig& config, kernels::PackOptions& pack) {
  const Ort::KeyValuePairs entries = info.GetConfigEntries();
  if (const char* v = entries.GetValue(kConfigMaxLevel)) {
    auto level = kernels::parse_level(v);
    if (!level) fail(kConfigMaxLevel, std::string("unknown level '") + v + "'");
    config.level = std::min(*level, config.level);
  }
  if (const char* v = entries.GetValue(kConfigAmxMinRows)) config.amx_min_rows = std::stoll(v);
  if (const char* v = entries.GetValue(kConfigCompactScales)) pack.compact_scales = std::string(v) != "0";
  if (const char* v = entries.GetValue(kConfigPrefetch)) {
    auto prefetch = kernels::parse_prefetch(v);
    if (!prefetch) fail(kConfigPrefetch, std::string("expected l1:BYTES or l2:BYTES, not '") + v + "'");
    config.prefetch = *prefetch;
  }
  if (const char* v = entries.GetValue(kConfigAvxVnni)) config.avx_vnni = std::string(v) != "0";
  if (const char* v = entries.GetValue(kConfigHugePages))
    pack.pages = std::string(v) != "0" ? kernels::PageSize::Huge : kernels::PageSize::Small;
}

}  // namespace deltagen::ortext
