// gemm_f32_impl.h compiled with the AVX2 flags (CMakeLists.txt): 8 lanes, FMA.
#include "kernels/gemm_f32_impl.h"

namespace deltagen::kernels {

const GemmF32Kernels kGemmF32Avx2{KernelLevel::Avx2, GemmTile<8>::kPanel, GemmTile<8>::block};

}  // namespace deltagen::kernels
