// deltagen.GroupQueryAttention: the inputs, outputs and attributes of
// com.microsoft.GroupQueryAttention in the form the builder emits (float,
// past and present key/value sharing one buffer of capacity `cap`, rotary
// inside or not, not interleaved; no window, softcap, bias, sink or position
// ids), computed by kernels::attention. Moved in at load time (model_rewrite.h).
//
// inputs  0 query [B,S,N*H]  1 key [B,S,Nkv*H]  2 value  3 past_key [B,Nkv,cap,H]  4 past_value
//         5 seqlens_k int32 [B]  6 total_sequence_length int32 []  7 cos_cache [P,R/2]  8 sin_cache
// outputs 0 [B,S,N*H]  1 present_key, 2 present_value [B,Nkv,max(total, cap),H] (as ORT: the
//         same buffer as past when bound so; otherwise past is copied in first)
// With deltagen_gated_qkv_head_dim = H (attention_fusion.h, deltagen_ops.h):
//         input 0 is the packed [B,S,N*2H + 2*Nkv*H] projection, 1 and 2 are
//         absent, 9 and 10 are the q and k norm weights [H], and output 0 is gated.
#pragma once
#include <onnxruntime_cxx_api.h>

namespace deltagen::ortext {

class AttentionKernel {
 public:
  explicit AttentionKernel(const OrtKernelInfo* info);  // throws
  OrtStatusPtr ComputeV2(OrtKernelContext* context) noexcept;

 private:
  int64_t heads_ = 0, kv_heads_ = 0;
  float scale_ = 0;
  bool rotary_ = false;
  int64_t gated_head_dim_ = 0;  // > 0: the gated, q/k-normed form (kernels/gated_qkv.h)
  float q_norm_epsilon_ = 0, k_norm_epsilon_ = 0;
};

struct AttentionOp : Ort::CustomOpBase<AttentionOp, AttentionKernel, /*WithStatus=*/true> {
  OrtStatusPtr CreateKernelV2(const OrtApi& api, const OrtKernelInfo* info, void** kernel) const noexcept;
  const char* GetName() const { return "GroupQueryAttention"; }

  size_t GetInputTypeCount() const { return 11; }
  ONNXTensorElementDataType GetInputType(size_t index) const {
    return index == 5 || index == 6 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t index) const {
    return index == 0 || (index >= 3 && index < 7) ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED
                                                   : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL;
  }
  size_t GetOutputTypeCount() const { return 3; }
  ONNXTensorElementDataType GetOutputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT; }

  AttentionOp() { OrtCustomOp::InferOutputShapeFn = &AttentionOp::infer_output_shape; }
  // output 0: the query's type and shape (gated: [B,S,N*H]); 1, 2: past_key's.
  static OrtStatusPtr infer_output_shape(const OrtCustomOp* op, OrtShapeInferContext* context);
};

}  // namespace deltagen::ortext
