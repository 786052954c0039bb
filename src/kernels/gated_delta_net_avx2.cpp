// gated_delta_net_impl.h compiled with the AVX2 flags (CMakeLists.txt);
// called only when cpu_features() says this CPU has them.
#include "kernels/gated_delta_net_impl.h"

namespace deltagen::kernels {

const GatedDeltaKernels& gated_delta_kernels_avx2() {
  static const GatedDeltaKernels k{conv_silu_range, silu_loop, heads_with_loops, widen_f16, narrow_f16};
  return k;
}

}  // namespace deltagen::kernels
