// The AVX2 tile with AVX-VNNI's VPDPBUSD (matmul_avx2_tile.h), compiled with
// the AVX2 flags plus -mavxvnni (CMakeLists.txt). Reached only from
// gemm_q8_avx2 when this CPU has AVX-VNNI (Alder Lake and later, Zen 5).
#include "kernels/matmul_avx2_tile.h"

namespace deltagen::kernels::detail {

void gemm_q8_avx2_vnni_tiles(const Q8GemmArgs& args, int64_t g_begin, int64_t g_end, int64_t m_begin, int64_t m_end) {
  avx2_tiles<true>(args, g_begin, g_end, m_begin, m_end);
}

}  // namespace deltagen::kernels::detail
