// deltagen.GatedDeltaNet: one node for the chain the builder emits between a
// linear-attention layer's in_proj and its out_proj (conv + SiLU, q/k L2
// norms, LinearAttentionGate, LinearAttention, GatedRMSNorm; see
// src/kernels/gated_delta_net.h). It exists only in memory: the load-time
// rewrite (gated_delta_fusion.h) puts it in place of those nodes, and the
// file keeps the com.microsoft ops stock ONNX Runtime runs.
//
// inputs  0 x [B,S,C]  1 conv weight [C,1,K] (constant)  2 conv past_state [B,C,K-1]
//         3 z [B,S,nv*dv]  4 a [B,S,nv]  5 b [B,S,nv]  6 dt_bias [nv]  7 -exp(A_log) [nv]
//         8 recurrent past_state [B,nv,dk,dv]  9 norm weight [dv]
// outputs 0 [B,S,nv*dv] (out_proj's input)  1 conv present_state  2 recurrent present_state
// The states (inputs 2 and 8, outputs 1 and 2) are all float or all float16
// (a --state-dtype fp16 build, whose state Casts the fusion takes in).
// attributes q_num_heads (nk), kv_num_heads (nv), scale (0: 1/sqrt(dk)), epsilon;
//   optional in_proj_widths [C, nv*dv, nv, nv]: input 0 is then the in_proj
//   output [B,S,C+nv*dv+2nv] = [x | z | b | a] and inputs 3-5 are absent (the
//   fusion took the Split in too).
#pragma once
#include <vector>

#include <onnxruntime_cxx_api.h>

namespace deltagen::ortext {

class GatedDeltaNetKernel {
 public:
  explicit GatedDeltaNetKernel(const OrtKernelInfo* info);  // throws
  OrtStatusPtr ComputeV2(OrtKernelContext* context) noexcept;

 private:
  int64_t nk_ = 0, nv_ = 0;
  float scale_ = 0, epsilon_ = 1e-6f;
  int64_t channels_ = 0, taps_ = 0;
  // The in_proj output's column widths [x, z, b, a] when input 0 is that whole
  // tensor (its Split folded in; inputs 3-5 absent), else empty.
  std::vector<int64_t> in_proj_widths_;
  std::vector<float> conv_w_t_;  // [K, C]
};

struct GatedDeltaNetOp : Ort::CustomOpBase<GatedDeltaNetOp, GatedDeltaNetKernel, /*WithStatus=*/true> {
  OrtStatusPtr CreateKernelV2(const OrtApi& api, const OrtKernelInfo* info, void** kernel) const noexcept;
  const char* GetName() const { return "GatedDeltaNet"; }

  // The two states are float or float16 (both the same; checked when it runs).
  size_t GetInputTypeCount() const { return 10; }
  ONNXTensorElementDataType GetInputType(size_t index) const {
    return index == 2 || index == 8 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t index) const {  // z, a, b: see in_proj_widths
    return index >= 3 && index <= 5 ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL
                                    : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED;
  }
  size_t GetOutputTypeCount() const { return 3; }
  ONNXTensorElementDataType GetOutputType(size_t index) const {
    return index == 0 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  }

  GatedDeltaNetOp() { OrtCustomOp::InferOutputShapeFn = &GatedDeltaNetOp::infer_output_shape; }
  // output 0: z's type and shape (packed input: input 0's with the last dim nv*dv);
  // 1: the conv past_state's; 2: the recurrent past_state's.
  static OrtStatusPtr infer_output_shape(const OrtCustomOp* op, OrtShapeInferContext* context);
};

}  // namespace deltagen::ortext
