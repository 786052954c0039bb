#include "ortext/moe_op.h"

#include <cmath>
#include <string>
#include <vector>

#include "deltagen/error.h"
#include "ortext/deltagen_ops.h"
#include "ortext/kernel_attributes.h"
#include "ortext/matmul_config.h"
#include "ortext/ort_parallel.h"
#include "ortext/released_weights.h"
#include "ortext/shape_inference.h"
#include "util/number_text.h"

namespace deltagen::ortext {
namespace {

enum Input : size_t { kX = 0, kRouter = 1, kFc1 = 2, kFc1Scales = 3, kFc2 = 5, kFc2Scales = 6, kInputCount = 21 };
constexpr const char* kOp = "deltagen.QMoE";

bool input_present(const Ort::ConstKernelInfo& info, size_t index) {
  return index < info.GetInputCount() && !info.GetInputName(index).empty();
}

// Input `index` as a constant initializer of `type`: its data and shape.
Ort::ConstValue constant_input(const Ort::ConstKernelInfo& info, size_t index, const char* name,
                               ONNXTensorElementDataType type, std::vector<int64_t>& dims) {
  int is_constant = 0;
  Ort::ConstValue v = info.GetTensorConstantInput(index, &is_constant);
  if (!is_constant) fail(kOp, std::string(name) + " must be a constant initializer (the experts are packed at load)");
  const Ort::TensorTypeAndShapeInfo t = v.GetTensorTypeAndShapeInfo();
  if (t.GetElementType() != type)
    fail(kOp, std::string(name) + (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 ? " must be uint8" : " must be float"));
  dims = t.GetShape();
  return v;
}

// What deltagen's kernel computes: Qwen's silu(gate) * up over int4 experts.
void check_attributes(const Ort::ConstKernelInfo& info) {
  auto refuse = [](const std::string& what) { fail(kOp, what + " is not supported"); };
  if (const int64_t bits = attribute_or<int64_t>(info, "expert_weight_bits", 4); bits != 4)
    refuse("expert_weight_bits=" + std::to_string(bits));
  if (const auto act = attribute_or<std::string>(info, "activation_type", "relu"); act != "swiglu")
    refuse("activation_type '" + act + "'");
  if (const int64_t f = attribute_or<int64_t>(info, "swiglu_fusion", 0); f != 1)
    refuse("swiglu_fusion=" + std::to_string(f));
  if (attribute_or<float>(info, "activation_alpha", 1.0f) != 1.0f ||
      attribute_or<float>(info, "activation_beta", 0.0f) != 0.0f)
    refuse("activation_alpha/beta other than 1/0");
  if (const float limit = attribute_or<float>(info, "swiglu_limit", INFINITY); !(std::isinf(limit) && limit > 0))
    refuse("swiglu_limit=" + std::to_string(limit));
  if (attribute_or<int64_t>(info, "use_sparse_mixer", 0) != 0) refuse("use_sparse_mixer");
  if (const auto q = attribute_or<std::string>(info, "quant_type", "int"); q != "int") refuse("quant_type '" + q + "'");
  // normalize_routing_weights is not read: com.microsoft.QMoE without
  // router_weights soft-maxes the k chosen logits whatever it says.
  static const char* const kUnused[kInputCount] = {
      nullptr, nullptr, nullptr, nullptr, "fc1_experts_bias", nullptr, nullptr, "fc2_experts_bias",
      "fc3_experts_weights", "fc3_scales", "fc3_experts_bias", "fc1_zero_points", "fc2_zero_points",
      "fc3_zero_points", "router_weights", "fc1_global_scale", "fc2_global_scale", "fc1_act_scale",
      "fc2_act_scale", "fc1_act_block_scale", "fc2_act_block_scale"};
  for (size_t i = 0; i < kInputCount; ++i)
    if (kUnused[i] && input_present(info, i)) refuse(std::string("input ") + kUnused[i]);
}

}  // namespace

QMoeKernel::QMoeKernel(const OrtKernelInfo* raw_info) {
  Ort::ConstKernelInfo info(raw_info);
  check_attributes(info);
  k_ = attribute_or<int64_t>(info, "k", 1);
  const int64_t block_size = attribute_or<int64_t>(info, "block_size", 0);
  if (block_size == 0) fail(kOp, "needs the attribute block_size (block-wise scales)");
  if (block_size < 16 || block_size > 256)
    fail(kOp, "block_size=" + std::to_string(block_size) + " is not a power of two in [16, 256]");
  kernels::PackOptions pack;
  read_matmul_config(info, config_, pack);

  std::vector<int64_t> d1, s1, d2, s2;
  Ort::ConstValue fc1 = constant_input(info, kFc1, "fc1_experts_weights", ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, d1);
  Ort::ConstValue fc1_scales = constant_input(info, kFc1Scales, "fc1_scales", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, s1);
  Ort::ConstValue fc2 = constant_input(info, kFc2, "fc2_experts_weights", ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, d2);
  Ort::ConstValue fc2_scales = constant_input(info, kFc2Scales, "fc2_scales", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, s2);
  if (d1.size() != 3 || d1[1] % 2 != 0) fail(kOp, "fc1_experts_weights must be [E, 2I, H/2], not " + dims_text(d1));
  kernels::MoeWeightsView view;
  view.experts = d1[0];
  view.inter = d1[1] / 2;
  view.hidden = d1[2] * 2;
  view.block_size = int(block_size);
  kernels::check_moe_shape(view);
  const int64_t E = view.experts, H = view.hidden, I = view.inter;
  auto expect = [](const char* name, const std::vector<int64_t>& got, const std::vector<int64_t>& want) {
    if (got != want) fail(kOp, std::string(name) + " is " + dims_text(got) + ", expected " + dims_text(want));
  };
  expect("fc1_scales", s1, {E, 2 * I, H / block_size});
  expect("fc2_experts_weights", d2, {E, H, I / 2});
  expect("fc2_scales", s2, {E, H, I / block_size});
  if (k_ < 1 || k_ > E) fail(kOp, "k=" + std::to_string(k_) + " must be in [1, " + std::to_string(E) + "]");
  view.fc1 = fc1.GetTensorData<uint8_t>();
  view.fc1_scales = fc1_scales.GetTensorData<float>();
  view.fc2 = fc2.GetTensorData<uint8_t>();
  view.fc2_scales = fc2_scales.GetTensorData<float>();
  experts_.emplace(kernels::pack_moe_experts(view, pack));
  if (attribute_or<int64_t>(info, kReleaseWeightsAttribute, 0) != 0) {  // the rewrite saw no other reader
    release_mapped_weight(view.fc1, size_t(E * 2 * I * H / 2));
    release_mapped_weight(view.fc1_scales, size_t(E * 2 * I * (H / block_size)) * sizeof(float));
    release_mapped_weight(view.fc2, size_t(E * H * I / 2));
    release_mapped_weight(view.fc2_scales, size_t(E * H * (I / block_size)) * sizeof(float));
  }
}

OrtStatusPtr QMoeKernel::ComputeV2(OrtKernelContext* context) noexcept {
  try {
    Ort::KernelContext ctx(context);
    Ort::ConstValue x = ctx.GetInput(kX);
    Ort::ConstValue router = ctx.GetInput(kRouter);
    const std::vector<int64_t> xd = x.GetTensorTypeAndShapeInfo().GetShape();
    const std::vector<int64_t> rd = router.GetTensorTypeAndShapeInfo().GetShape();
    const int64_t H = experts_->hidden(), E = experts_->experts();
    if ((xd.size() != 2 && xd.size() != 3) || xd.back() != H)
      fail(kOp, "input must be [tokens, " + std::to_string(H) + "] or [batch, seq, " + std::to_string(H) + "], not " +
                    dims_text(xd));
    const int64_t tokens = xd.size() == 2 ? xd[0] : xd[0] * xd[1];
    if (rd != std::vector<int64_t>{tokens, E})
      fail(kOp, "router_probs must be [" + std::to_string(tokens) + ", " + std::to_string(E) + "], not " +
                    dims_text(rd));
    Ort::UnownedValue y = ctx.GetOutput(0, xd);
    kernels::moe_forward(*experts_, x.GetTensorData<float>(), router.GetTensorData<float>(), tokens, k_,
                         y.GetTensorMutableData<float>(), OrtParallel(ctx), config_);
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_RUNTIME_EXCEPTION).release();
  }
}

OrtStatusPtr QMoeOp::CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const noexcept {
  try {
    *kernel = new QMoeKernel(info);
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_INVALID_ARGUMENT).release();
  }
}

ONNXTensorElementDataType QMoeOp::GetInputType(size_t index) const {
  switch (index) {
    case 2: case 5: case 8: case 11: case 12: case 13:  // the experts' codes and zero points
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
    default:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  }
}

OrtCustomOpInputOutputCharacteristic QMoeOp::GetInputCharacteristic(size_t index) const {
  const bool required = index <= kFc1Scales || index == kFc2 || index == kFc2Scales;
  return required ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED
                  : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL;
}

OrtStatusPtr QMoeOp::infer_output_shape(const OrtCustomOp*, OrtShapeInferContext* context) {
  return pass_through_shapes(context, {{kX, 0}});
}

}  // namespace deltagen::ortext
