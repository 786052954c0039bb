// swiglu_impl.h compiled with the AVX2 flags (CMakeLists.txt); reached only
// through kSwigluFamily, when this CPU has them. Before, AVX2 machines ran
// the SSE2 loop (4 lanes); this is the AVX-512 file's loop at 8.
#include "kernels/swiglu_impl.h"

namespace deltagen::kernels {

const SwigluKernels kSwigluAvx2{KernelLevel::Avx2, swiglu_rows_vectorized};

}  // namespace deltagen::kernels
