#include "ortext/matmul_nbits_op.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/rms_norm.h"
#include "kernels/swiglu.h"
#include "ortext/deltagen_ops.h"
#include "ortext/kernel_attributes.h"
#include "ortext/matmul_config.h"
#include "ortext/ort_parallel.h"
#include "ortext/released_weights.h"
#include "ortext/shape_inference.h"
#include "deltagen/error.h"

namespace deltagen::ortext {
namespace {

enum Input : size_t { kA = 0, kB = 1, kScales = 2, kZeroPoints = 3, kGIdx = 4, kBias = 5, kSkip = 6, kNormWeight = 7 };


bool input_present(const Ort::ConstKernelInfo& info, size_t index) {
  return index < info.GetInputCount() && !info.GetInputName(index).empty();
}

void check_size(const char* what, size_t got, int64_t want) {
  if (int64_t(got) != want)
    fail("deltagen.MatMulNBits", std::string(what) + " has " + std::to_string(got) + " elements, expected " +
                                     std::to_string(want));
}

}  // namespace

MatMulNBitsKernel::MatMulNBitsKernel(const OrtKernelInfo* raw_info) {
  Ort::ConstKernelInfo info(raw_info);
  shape_.k = info.GetAttribute<int64_t>("K");
  shape_.n = info.GetAttribute<int64_t>("N");
  shape_.bits = int(info.GetAttribute<int64_t>("bits"));
  shape_.block_size = int(info.GetAttribute<int64_t>("block_size"));
  kernels::check_supported(shape_);
  if (input_present(info, kGIdx)) fail("deltagen.MatMulNBits", "g_idx is not supported");
  swiglu_ = attribute_or<int64_t>(info, kSwigluAttribute, 0) != 0;
  rmsnorm_ = attribute_or<int64_t>(info, kRmsNormAttribute, 0);
  rmsnorm_epsilon_ = attribute_or<float>(info, kRmsNormEpsilonAttribute, 0.0f);
  if (rmsnorm_ < 0 || rmsnorm_ > 2 || (rmsnorm_ && swiglu_) || !(rmsnorm_epsilon_ >= 0))
    fail("deltagen.MatMulNBits", "bad deltagen_rmsnorm attributes");
  if (rmsnorm_ && !input_present(info, kNormWeight)) fail("deltagen.MatMulNBits", "the folded norm has no weight");

  read_matmul_config(info, config_, pack_options_);

  int b_const = 0, scales_const = 0, zp_const = 1;
  Ort::ConstValue b = info.GetTensorConstantInput(kB, &b_const);
  Ort::ConstValue scales = info.GetTensorConstantInput(kScales, &scales_const);
  Ort::ConstValue zero_points{nullptr};
  const bool has_zp = input_present(info, kZeroPoints);
  if (has_zp) zero_points = info.GetTensorConstantInput(kZeroPoints, &zp_const);
  if (!(b_const && scales_const && zp_const)) return;  // pack per call

  kernels::NBitsWeightsView view;
  view.shape = shape_;
  check_size("B", b.GetTensorTypeAndShapeInfo().GetElementCount(), shape_.n * shape_.k_blocks() * shape_.file_block_bytes());
  check_size("scales", scales.GetTensorTypeAndShapeInfo().GetElementCount(), shape_.n * shape_.k_blocks());
  view.data = b.GetTensorData<uint8_t>();
  view.scales = scales.GetTensorData<float>();
  if (has_zp) {
    check_size("zero_points", zero_points.GetTensorTypeAndShapeInfo().GetElementCount(), shape_.n * shape_.zero_point_row_bytes());
    view.zero_points = zero_points.GetTensorData<uint8_t>();
  }
  // With the rewrite's leave (no other node reads them in full), B's rows
  // are given back as they are packed, so a large weight (the 0.8B model's
  // 127 MB lm_head) is never held twice; then the scales.
  const bool release = attribute_or<int64_t>(info, kReleaseWeightsAttribute, 0) != 0;
  kernels::PackOptions options = pack_options_;
  if (release)
    options.rows_packed = [&view, this](int64_t begin, int64_t end) {
      const int64_t row = shape_.k_blocks() * shape_.file_block_bytes();
      release_mapped_weight(view.data + begin * row, size_t((end - begin) * row));
      if (view.zero_points)
        release_mapped_weight(view.zero_points + begin * shape_.zero_point_row_bytes(),
                              size_t((end - begin) * shape_.zero_point_row_bytes()));
    };
  packed_.emplace(kernels::pack_weights(view, options));
  if (release) release_mapped_weight(view.scales, size_t(shape_.n * shape_.k_blocks()) * sizeof(float));
}

kernels::NBitsWeightsView MatMulNBitsKernel::weights_from_inputs(const Ort::KernelContext& ctx) const {
  kernels::NBitsWeightsView view;
  view.shape = shape_;
  Ort::ConstValue b = ctx.GetInput(kB);
  Ort::ConstValue scales = ctx.GetInput(kScales);
  check_size("B", b.GetTensorTypeAndShapeInfo().GetElementCount(), shape_.n * shape_.k_blocks() * shape_.file_block_bytes());
  check_size("scales", scales.GetTensorTypeAndShapeInfo().GetElementCount(), shape_.n * shape_.k_blocks());
  view.data = b.GetTensorData<uint8_t>();
  view.scales = scales.GetTensorData<float>();
  if (ctx.GetInputCount() > kZeroPoints) {
    Ort::ConstValue zp = ctx.GetInput(kZeroPoints);
    if (zp) {
      check_size("zero_points", zp.GetTensorTypeAndShapeInfo().GetElementCount(), shape_.n * shape_.zero_point_row_bytes());
      view.zero_points = zp.GetTensorData<uint8_t>();
    }
  }
  return view;
}

OrtStatusPtr MatMulNBitsKernel::ComputeV2(OrtKernelContext* context) noexcept {
  try {
    Ort::KernelContext ctx(context);
    Ort::ConstValue a = ctx.GetInput(kA);
    std::vector<int64_t> dims = a.GetTensorTypeAndShapeInfo().GetShape();
    const int64_t a_width = swiglu_ ? 2 * shape_.k : shape_.k;
    if (dims.empty() || dims.back() != a_width)
      fail("deltagen.MatMulNBits", "A's last dimension must be " + std::to_string(a_width));
    int64_t m = 1;
    for (size_t i = 0; i + 1 < dims.size(); ++i) m *= dims[i];
    dims.back() = shape_.n;
    Ort::UnownedValue y = ctx.GetOutput(0, dims);
    if (m == 0) return nullptr;

    const float* bias = nullptr;
    if (ctx.GetInputCount() > kBias) {
      Ort::ConstValue b = ctx.GetInput(kBias);
      if (b) {
        check_size("bias", b.GetTensorTypeAndShapeInfo().GetElementCount(), shape_.n);
        bias = b.GetTensorData<float>();
      }
    }
    std::optional<kernels::PackedWeights> per_call;
    if (!packed_) per_call.emplace(kernels::pack_weights(weights_from_inputs(ctx), pack_options_));
    const kernels::PackedWeights& packed = packed_ ? *packed_ : *per_call;
    const float* a_data = a.GetTensorData<float>();
    // Decode reuses one small buffer per thread; a prompt's rows (up to
    // MBs) are freed again after the call.
    thread_local std::vector<float> decode_rows;
    std::vector<float> prompt_rows;
    if (swiglu_) {
      std::vector<float>& activated = m <= 4 ? decode_rows : prompt_rows;
      activated.resize(size_t(m * shape_.k));
      kernels::swiglu(a_data, m, shape_.k, activated.data(), config_.level);
      a_data = activated.data();
    }
    if (rmsnorm_) {
      const float* skip = nullptr;
      if (ctx.GetInputCount() > kSkip) {
        Ort::ConstValue s = ctx.GetInput(kSkip);
        if (s) {
          check_size("the norm's skip", s.GetTensorTypeAndShapeInfo().GetElementCount(), m * shape_.k);
          skip = s.GetTensorData<float>();
        }
      }
      Ort::ConstValue w = ctx.GetInput(kNormWeight);
      check_size("the norm's weight", w.GetTensorTypeAndShapeInfo().GetElementCount(), shape_.k);
      float* sum = nullptr;
      if (rmsnorm_ == 2) {
        dims.back() = shape_.k;
        sum = ctx.GetOutput(1, dims).GetTensorMutableData<float>();
      }
      std::vector<float>& normed = m <= 4 ? decode_rows : prompt_rows;
      normed.resize(size_t(m * shape_.k));
      kernels::rms_norm_rows(a_data, skip, w.GetTensorData<float>(), m, shape_.k, rmsnorm_epsilon_, sum, normed.data(),
                             OrtParallel(ctx));
      a_data = normed.data();
    }
    kernels::matmul_nbits(packed, a_data, m, bias, y.GetTensorMutableData<float>(), OrtParallel(ctx), config_);
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_RUNTIME_EXCEPTION).release();
  }
}

OrtStatusPtr MatMulNBitsOp::CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const noexcept {
  try {
    *kernel = new MatMulNBitsKernel(info);
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_INVALID_ARGUMENT).release();
  }
}

ONNXTensorElementDataType MatMulNBitsOp::GetInputType(size_t index) const {
  switch (index) {
    case kB:
    case kZeroPoints: return ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8;
    case kGIdx: return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
    default: return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  }
}

OrtCustomOpInputOutputCharacteristic MatMulNBitsOp::GetInputCharacteristic(size_t index) const {
  // (The norm weight is required when the rmsnorm attribute is set: checked by the kernel.)
  return index <= kScales ? OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_REQUIRED
                          : OrtCustomOpInputOutputCharacteristic::INPUT_OUTPUT_OPTIONAL;
}

OrtStatusPtr MatMulNBitsOp::infer_output_shape(const OrtCustomOp*, OrtShapeInferContext* context) {
  const OrtApi& api = Ort::GetApi();
  try {
    OrtTensorTypeAndShapeInfo* a_info = nullptr;  // owned by the context
    Ort::ThrowOnError(api.ShapeInferContext_GetInputTypeShape(context, kA, &a_info));
    // A folded norm's residual sum (output 1) is A's type and shape.
    const OrtOpAttr* norm = optional_attribute(context, kRmsNormAttribute);
    if (norm && int_attribute(norm) == 2) Ort::ThrowOnError(api.ShapeInferContext_SetOutputTypeShape(context, 1, a_info));
    const OrtOpAttr* n = optional_attribute(context, "N");
    if (!n) return Ort::Status("MatMulNBits needs the attribute N", ORT_INVALID_ARGUMENT).release();
    set_float_shape_with_last_dim(context, kA, 0, int_attribute(n));  // Y: A's shape with K -> N
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_INVALID_ARGUMENT).release();
  }
}

}  // namespace deltagen::ortext
