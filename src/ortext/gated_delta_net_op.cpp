#include "ortext/gated_delta_net_op.h"

#include <string>

#include "kernels/gated_delta_net.h"
#include "ortext/kernel_attributes.h"
#include "ortext/ort_parallel.h"
#include "ortext/shape_inference.h"
#include "deltagen/error.h"

namespace deltagen::ortext {
namespace {

enum Input : size_t {
  kX = 0, kConvWeight, kConvPast, kZ, kA, kB, kDtBias, kNegExpA, kStatePast, kNormWeight
};
constexpr const char* kOp = "deltagen.GatedDeltaNet";

std::vector<int64_t> shape_of(const Ort::ConstValue& v) { return v.GetTensorTypeAndShapeInfo().GetShape(); }

}  // namespace

GatedDeltaNetKernel::GatedDeltaNetKernel(const OrtKernelInfo* raw_info) {
  Ort::ConstKernelInfo info(raw_info);
  nk_ = info.GetAttribute<int64_t>("q_num_heads");
  nv_ = info.GetAttribute<int64_t>("kv_num_heads");
  scale_ = attribute_or<float>(info, "scale", 0.0f);
  epsilon_ = attribute_or<float>(info, "epsilon", 1e-6f);
  if (nk_ < 1 || nv_ < 1 || nv_ % nk_ != 0) fail(kOp, "kv_num_heads must be a multiple of q_num_heads");
  int is_constant = 0;
  Ort::ConstValue w = info.GetTensorConstantInput(kConvWeight, &is_constant);
  if (!is_constant) fail(kOp, "the conv weight must be a constant");
  const std::vector<int64_t> wd = shape_of(w);
  if (wd.size() != 3 || wd[1] != 1 || wd[2] < 1) fail(kOp, "conv weight must be [channels, 1, kernel]");
  channels_ = wd[0];
  taps_ = wd[2];
  in_proj_widths_ = attributes_or_empty<int64_t>(info, "in_proj_widths");
  if (!in_proj_widths_.empty() &&
      (in_proj_widths_.size() != 4 || in_proj_widths_[0] != channels_ || in_proj_widths_[1] < 1 ||
       in_proj_widths_[1] % nv_ != 0 || in_proj_widths_[2] != nv_ || in_proj_widths_[3] != nv_))
    fail(kOp, "in_proj_widths must be [channels, nv*dv, nv, nv]");
  const float* src = w.GetTensorData<float>();
  conv_w_t_.resize(size_t(channels_ * taps_));
  for (int64_t c = 0; c < channels_; ++c)
    for (int64_t j = 0; j < taps_; ++j) conv_w_t_[size_t(j * channels_ + c)] = src[c * taps_ + j];
}

OrtStatusPtr GatedDeltaNetKernel::ComputeV2(OrtKernelContext* context) noexcept {
  try {
    Ort::KernelContext ctx(context);
    Ort::ConstValue x = ctx.GetInput(kX);
    std::vector<int64_t> xd = shape_of(x), zd;
    const bool packed = !in_proj_widths_.empty();
    if (packed) {  // [x | z | b | a]: the views below; z's shape is its columns'
      const int64_t width = in_proj_widths_[0] + in_proj_widths_[1] + 2 * nv_;
      if (xd.size() != 3 || xd[2] != width) fail(kOp, "the in_proj output must be [batch, seq, " + std::to_string(width) + "]");
      zd = {xd[0], xd[1], in_proj_widths_[1]};
      xd[2] = in_proj_widths_[0];
    } else {
      zd = shape_of(ctx.GetInput(kZ));
    }
    if (xd.size() != 3 || zd.size() != 3 || zd[0] != xd[0] || zd[1] != xd[1])
      fail(kOp, "x and z must be [batch, seq, channels] with the same batch and seq");
    kernels::GatedDeltaShape s;
    s.batch = xd[0];
    s.seq = xd[1];
    s.nk = nk_;
    s.nv = nv_;
    s.conv_kernel = taps_;
    if (zd[2] % nv_ != 0) fail(kOp, "z's width is not a multiple of kv_num_heads");
    s.dv = zd[2] / nv_;
    const int64_t key_width = xd[2] - nv_ * s.dv;  // 2 nk dk
    if (xd[2] != channels_ || key_width <= 0 || key_width % (2 * nk_) != 0)
      fail(kOp, "x's width does not match the conv weight and the head counts");
    s.dk = key_width / (2 * nk_);
    if (s.dk > kernels::kMaxDeltaHeadDim || s.dv > kernels::kMaxDeltaHeadDim) fail(kOp, "head dim above 512");

    auto checked = [&](size_t index, const std::vector<int64_t>& want, const char* what) {
      Ort::ConstValue v = ctx.GetInput(index);
      if (shape_of(v) != want) fail(kOp, std::string(what) + " has the wrong shape");
      return v;
    };
    auto expect = [&](size_t index, const std::vector<int64_t>& want, const char* what) {
      return checked(index, want, what).GetTensorData<float>();
    };
    const int64_t st = taps_ - 1;
    kernels::GatedDeltaTensors t;
    t.x = x.GetTensorData<float>();
    t.conv_w_t = conv_w_t_.data();
    const std::vector<int64_t> conv_shape = {s.batch, channels_, st}, state_shape = {s.batch, nv_, s.dk, s.dv};
    Ort::ConstValue conv_past = checked(kConvPast, conv_shape, "conv past_state");
    Ort::ConstValue state_past = checked(kStatePast, state_shape, "recurrent past_state");
    const auto state_type = state_past.GetTensorTypeAndShapeInfo().GetElementType();
    if (conv_past.GetTensorTypeAndShapeInfo().GetElementType() != state_type ||
        (state_type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT && state_type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16))
      fail(kOp, "the conv and recurrent states must both be float or both float16");
    const bool f16 = state_type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    if (packed) {
      const float* in_proj = x.GetTensorData<float>();
      t.in_stride = in_proj_widths_[0] + in_proj_widths_[1] + 2 * nv_;
      t.z = in_proj + in_proj_widths_[0];
      t.b = t.z + in_proj_widths_[1];
      t.a = t.b + nv_;
    } else {
      t.z = ctx.GetInput(kZ).GetTensorData<float>();
      t.a = expect(kA, {s.batch, s.seq, nv_}, "a");
      t.b = expect(kB, {s.batch, s.seq, nv_}, "b");
    }
    t.dt_bias = expect(kDtBias, {nv_}, "dt_bias");
    t.neg_exp_a = expect(kNegExpA, {nv_}, "-exp(A_log)");
    t.norm_w = expect(kNormWeight, {s.dv}, "norm weight");
    t.out = ctx.GetOutput(0, zd).GetTensorMutableData<float>();
    Ort::UnownedValue conv_present = ctx.GetOutput(1, conv_shape), state_present = ctx.GetOutput(2, state_shape);
    if (f16) {
      t.conv_past_f16 = conv_past.GetTensorData<uint16_t>();
      t.state_past_f16 = state_past.GetTensorData<uint16_t>();
      t.conv_present_f16 = conv_present.GetTensorMutableData<uint16_t>();
      t.state_present_f16 = state_present.GetTensorMutableData<uint16_t>();
    } else {
      t.conv_past = conv_past.GetTensorData<float>();
      t.state_past = state_past.GetTensorData<float>();
      t.conv_present = conv_present.GetTensorMutableData<float>();
      t.state_present = state_present.GetTensorMutableData<float>();
    }
    kernels::gated_delta_net(s, {scale_, epsilon_}, t, OrtParallel(ctx));
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_RUNTIME_EXCEPTION).release();
  }
}

OrtStatusPtr GatedDeltaNetOp::CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const noexcept {
  try {
    *kernel = new GatedDeltaNetKernel(info);
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_INVALID_ARGUMENT).release();
  }
}

OrtStatusPtr GatedDeltaNetOp::infer_output_shape(const OrtCustomOp*, OrtShapeInferContext* context) {
  try {
    const OrtOpAttr* widths = optional_attribute(context, "in_proj_widths");
    if (!widths) return pass_through_shapes(context, {{kZ, 0}, {kConvPast, 1}, {kStatePast, 2}});
    int64_t w[4] = {};  // packed: output 0 is input 0's shape with z's width
    ints_attribute(widths, w, 4);
    set_float_shape_with_last_dim(context, kX, 0, w[1]);
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_INVALID_ARGUMENT).release();
  }
  return pass_through_shapes(context, {{kConvPast, 1}, {kStatePast, 2}});
}

}  // namespace deltagen::ortext
