// gated_delta_net_impl.h compiled with the AVX2 flags (CMakeLists.txt);
// reached only through kGatedDeltaFamily, when the CPU has them.
#include "kernels/gated_delta_net_impl.h"

namespace deltagen::kernels {

const GatedDeltaKernels kGatedDeltaAvx2{KernelLevel::Avx2, conv_silu_range, silu_loop, heads_with_loops, widen_f16,
                                        narrow_f16};

}  // namespace deltagen::kernels
