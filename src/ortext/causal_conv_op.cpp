#include "ortext/causal_conv_op.h"

#include <string>
#include <vector>

#include "kernels/causal_conv.h"
#include "ortext/kernel_attributes.h"
#include "ortext/ort_parallel.h"
#include "ortext/shape_inference.h"
#include "deltagen/error.h"

namespace deltagen::ortext {
namespace {

enum Input : size_t { kInput = 0, kWeight = 1, kBias = 2, kPast = 3 };
constexpr const char* kOp = "deltagen.CausalConvWithState";

Ort::ConstValue optional_input(const Ort::KernelContext& ctx, size_t index) {
  return index < ctx.GetInputCount() ? ctx.GetInput(index) : Ort::ConstValue{nullptr};
}

}  // namespace

CausalConvKernel::CausalConvKernel(const OrtKernelInfo* raw_info) {
  Ort::ConstKernelInfo info(raw_info);
  const std::string activation = attribute_or<std::string>(info, "activation", "none");
  if (activation != "silu" && activation != "swish" && activation != "none")
    fail(kOp, "unsupported activation '" + activation + "'");
  silu_ = activation != "none";
}

OrtStatusPtr CausalConvKernel::ComputeV2(OrtKernelContext* context) noexcept {
  try {
    Ort::KernelContext ctx(context);
    Ort::ConstValue x = ctx.GetInput(kInput);
    Ort::ConstValue w = ctx.GetInput(kWeight);
    const std::vector<int64_t> xd = x.GetTensorTypeAndShapeInfo().GetShape();
    const std::vector<int64_t> wd = w.GetTensorTypeAndShapeInfo().GetShape();
    if (xd.size() != 3) fail(kOp, "input must be [batch, channels, length]");
    if (wd.size() != 3 || wd[0] != xd[1] || wd[1] != 1 || wd[2] < 1)
      fail(kOp, "weight must be [channels, 1, kernel] with the input's channels");
    kernels::CausalConvShape s{xd[0], xd[1], xd[2], wd[2]};

    const float* bias = nullptr;
    if (Ort::ConstValue b = optional_input(ctx, kBias)) {
      if (int64_t(b.GetTensorTypeAndShapeInfo().GetElementCount()) != s.channels)
        fail(kOp, "bias must have one value per channel");
      bias = b.GetTensorData<float>();
    }
    const float* past = nullptr;
    if (Ort::ConstValue p = optional_input(ctx, kPast)) {
      const std::vector<int64_t> pd = p.GetTensorTypeAndShapeInfo().GetShape();
      if (pd != std::vector<int64_t>{s.batch, s.channels, s.kernel - 1})
        fail(kOp, "past_state must be [batch, channels, kernel - 1]");
      past = p.GetTensorData<float>();
    }
    Ort::UnownedValue y = ctx.GetOutput(0, xd);
    Ort::UnownedValue present = ctx.GetOutput(1, {s.batch, s.channels, s.kernel - 1});
    kernels::causal_conv1d(s, x.GetTensorData<float>(), w.GetTensorData<float>(), bias, past, silu_,
                           y.GetTensorMutableData<float>(), present.GetTensorMutableData<float>(), OrtParallel(ctx));
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_RUNTIME_EXCEPTION).release();
  }
}

OrtStatusPtr CausalConvOp::CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const noexcept {
  try {
    *kernel = new CausalConvKernel(info);
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_INVALID_ARGUMENT).release();
  }
}

OrtStatusPtr CausalConvOp::infer_output_shape(const OrtCustomOp*, OrtShapeInferContext* context) {
  return pass_through_shapes(context, {{kInput, 0}, {kPast, 1}});
}

}  // namespace deltagen::ortext
