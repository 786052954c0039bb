// gemm_f32_impl.h compiled with the AVX-512 flags (CMakeLists.txt): 16 lanes, FMA.
#include "kernels/gemm_f32_impl.h"

namespace deltagen::kernels {

const GemmF32Kernels kGemmF32Avx512{KernelLevel::Avx512, GemmTile<16>::kPanel, GemmTile<16>::block};

}  // namespace deltagen::kernels
