// The deltagen.MatMulNBits custom op (see deltagen_ops.h): the ORT glue around
// kernels::matmul_nbits. Internal to ortext; register_deltagen_ops() is the API.
#pragma once
#include <memory>
#include <optional>

#include <onnxruntime_cxx_api.h>

#include "kernels/matmul_nbits.h"
#include "kernels/packed_weights.h"

namespace deltagen::ortext {

class MatMulNBitsKernel {
 public:
  explicit MatMulNBitsKernel(const OrtKernelInfo* info);  // throws
  OrtStatusPtr ComputeV2(OrtKernelContext* context) noexcept;

 private:
  kernels::NBitsWeightsView weights_from_inputs(const Ort::KernelContext& ctx) const;

  kernels::NBitsShape shape_;
  bool swiglu_ = false;  // A is [gate | up] (2K wide); the kernel multiplies silu(gate) * up
  int64_t rmsnorm_ = 0;  // 1: A is normalized first (rms_norm.h); 2: and A + skip is output 1
  float rmsnorm_epsilon_ = 0;
  kernels::MatMulConfig config_;
  kernels::PackOptions pack_options_;
  // Packed once here when B, scales and zero points are constant initializers
  // (the normal case); otherwise repacked from the inputs on every call.
  std::optional<kernels::PackedWeights> packed_;
};

struct MatMulNBitsOp : Ort::CustomOpBase<MatMulNBitsOp, MatMulNBitsKernel, /*WithStatus=*/true> {
  OrtStatusPtr CreateKernelV2(const OrtApi& api, const OrtKernelInfo* info, void** kernel) const noexcept;
  const char* GetName() const { return "MatMulNBits"; }

  // com.microsoft.MatMulNBits' six, then the folded norm's skip and weight.
  size_t GetInputTypeCount() const { return 8; }
  ONNXTensorElementDataType GetInputType(size_t index) const;
  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t index) const;
  // Y, then the folded norm's residual sum.
  size_t GetOutputTypeCount() const { return 2; }
  ONNXTensorElementDataType GetOutputType(size_t) const { return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT; }
  OrtCustomOpInputOutputCharacteristic GetOutputCharacteristic(size_t index) const {
    return index == 0 ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED
                      : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL;
  }

  // Not named InferOutputShape: CustomOpBase would wire its C++ wrapper (see the .cpp).
  MatMulNBitsOp() { OrtCustomOp::InferOutputShapeFn = &MatMulNBitsOp::infer_output_shape; }

  // Y has A's shape with the last dimension K replaced by N; the residual sum A's.
  static OrtStatusPtr infer_output_shape(const OrtCustomOp* op, OrtShapeInferContext* context);
};

}  // namespace deltagen::ortext
