// The deltagen.CausalConvWithState custom op (see deltagen_ops.h): the inputs,
// outputs and attributes of com.microsoft.CausalConvWithState in the form the
// builder emits (float, ndim 1, channels first, dilation 1, activation silu,
// swish or none), computed by kernels::causal_conv1d. ORT 1.30's own CPU
// kernel spends ~110 µs on one decode step of a 6144-channel layer; this one
// does the few multiply-adds per channel and nothing else.
#pragma once
#include <onnxruntime_cxx_api.h>

namespace deltagen::ortext {

class CausalConvKernel {
 public:
  explicit CausalConvKernel(const OrtKernelInfo* info);  // throws
  OrtStatusPtr ComputeV2(OrtKernelContext* context) noexcept;

 private:
  bool silu_ = true;
};

struct CausalConvOp : Ort::CustomOpBase<CausalConvOp, CausalConvKernel, /*WithStatus=*/true> {
  OrtStatusPtr CreateKernelV2(const OrtApi& api, const OrtKernelInfo* info, void** kernel) const noexcept;
  const char* GetName() const { return "CausalConvWithState"; }

  size_t GetInputTypeCount() const { return 4; }  // input, weight, bias, past_state
  ONNXTensorElementDataType GetInputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT; }
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t index) const {
    return index < 2 ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED
                     : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL;
  }
  size_t GetOutputTypeCount() const { return 2; }  // output, present_state
  ONNXTensorElementDataType GetOutputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT; }

  CausalConvOp() { OrtCustomOp::InferOutputShapeFn = &CausalConvOp::infer_output_shape; }
  // output: the input's type and shape; present_state: past_state's.
  static OrtStatusPtr infer_output_shape(const OrtCustomOp* op, OrtShapeInferContext* context);
};

}  // namespace deltagen::ortext
