// gated_delta_net_impl.h compiled with the AVX2 flags (CMakeLists.txt);
// called only when cpu_features() says this CPU has them.
#include "kernels/gated_delta_net_impl.h"

namespace deltagen::kernels {

void gated_delta_head_avx2(const GatedDeltaHeadArgs& args, int64_t row, int64_t head) {
  gated_delta_head(args, row, head);
}

}  // namespace deltagen::kernels
