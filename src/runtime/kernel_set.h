#pragma once
#include <string>
#include <utility>
#include <vector>

namespace deltagen {

// Which kernels run a model (--kernels). The file stays as it is; deltagen's
// kernels are ONNX Runtime custom ops swapped in at load time (src/ortext):
//   Ort          ONNX Runtime's own (also: DELTAGEN_KERNELS=ort in the environment)
//   DeltagenOps  deltagen's MatMulNBits (int4, accuracy level 4) and CausalConvWithState
//   Deltagen     those, plus the fusions: each linear-attention layer's conv ...
//                GatedRMSNorm chain as one deltagen.GatedDeltaNet node, each MLP's
//                SwiGLU folded into its down_proj (the default)
enum class KernelSet { Ort, DeltagenOps, Deltagen };

// ONNX Runtime session config entries (key, value), in the order they are
// added: among them the kernels' own switches (src/ortext/deltagen_ops.h).
using SessionConfig = std::vector<std::pair<std::string, std::string>>;

}  // namespace deltagen
