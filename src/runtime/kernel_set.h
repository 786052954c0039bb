#pragma once

namespace deltagen {

// Which kernels run a model (--kernels). The file stays as it is; deltagen's
// kernels are ONNX Runtime custom ops swapped in at load time (src/ortext):
//   Ort          ONNX Runtime's own (also: DELTAGEN_KERNELS=ort in the environment)
//   DeltagenOps  deltagen's MatMulNBits (int4, accuracy level 4) and CausalConvWithState
//   Deltagen     those, plus the fusions: each linear-attention layer's conv ...
//                GatedRMSNorm chain as one deltagen.GatedDeltaNet node, each MLP's
//                SwiGLU folded into its down_proj (the default)
enum class KernelSet { Ort, DeltagenOps, Deltagen };

}  // namespace deltagen
