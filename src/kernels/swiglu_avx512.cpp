// swiglu_impl.h compiled with the AVX-512 flags (CMakeLists.txt); reached
// only through kSwigluFamily, when this CPU has them.
#include "kernels/swiglu_impl.h"

namespace deltagen::kernels {

const SwigluKernels kSwigluAvx512{KernelLevel::Avx512, swiglu_rows_vectorized};

}  // namespace deltagen::kernels
