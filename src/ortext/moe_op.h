// The deltagen.QMoE custom op (see deltagen_ops.h): the inputs, outputs and
// attributes of com.microsoft.QMoE in the form the builder writes for a
// Qwen3.5-MoE layer (float activations, int4 experts with block-wise float
// scales and no zero points, interleaved SwiGLU with alpha 1 and beta 0, no
// biases, fc3 or router_weights), computed by kernels::moe_forward. The
// experts are repacked once, when the session is created, so they must be
// constant initializers. ORT's own CPU kernel dequantizes the experts it
// runs to fp32 on every call; this one streams their packed int4 bytes
// (activations in int8 or bf16, as deltagen.MatMulNBits computes).
#pragma once
#include <optional>

#include <onnxruntime_cxx_api.h>

#include "kernels/matmul_nbits.h"
#include "kernels/moe_experts.h"

namespace deltagen::ortext {

class QMoeKernel {
 public:
  explicit QMoeKernel(const OrtKernelInfo* info);  // throws
  OrtStatusPtr ComputeV2(OrtKernelContext* context) noexcept;

 private:
  int64_t k_ = 1;
  kernels::MatMulConfig config_;
  std::optional<kernels::MoeExperts> experts_;
};

struct QMoeOp : Ort::CustomOpBase<QMoeOp, QMoeKernel, /*WithStatus=*/true> {
  OrtStatusPtr CreateKernelV2(const OrtApi& api, const OrtKernelInfo* info, void** kernel) const noexcept;
  const char* GetName() const { return "QMoE"; }

  // com.microsoft.QMoE's 21 (the kernel refuses the ones it does not use).
  size_t GetInputTypeCount() const { return 21; }
  ONNXTensorElementDataType GetInputType(size_t index) const;
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t index) const;
  size_t GetOutputTypeCount() const { return 1; }
  ONNXTensorElementDataType GetOutputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT; }

  QMoeOp() { OrtCustomOp::InferOutputShapeFn = &QMoeOp::infer_output_shape; }
  // The output: input 0's type and shape.
  static OrtStatusPtr infer_output_shape(const OrtCustomOp* op, OrtShapeInferContext* context);
};

}  // namespace deltagen::ortext
