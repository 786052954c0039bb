#include "ortext/shape_inference.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace deltagen::ortext {

OrtStatusPtr pass_through_shapes(OrtShapeInferContext* context,
                                 std::initializer_list<std::pair<size_t, size_t>> input_to_output) {
  const OrtApi& api = Ort::GetApi();
  try {
    size_t inputs = 0;
    Ort::ThrowOnError(api.ShapeInferContext_GetInputCount(context, &inputs));
    for (auto [in, out] : input_to_output) {
      if (in >= inputs) continue;
      OrtTensorTypeAndShapeInfo* info = nullptr;  // owned by the context
      Ort::ThrowOnError(api.ShapeInferContext_GetInputTypeShape(context, in, &info));
      if (info) Ort::ThrowOnError(api.ShapeInferContext_SetOutputTypeShape(context, out, info));
    }
    return nullptr;
  } catch (const std::exception& e) {
    return Ort::Status(e.what(), ORT_INVALID_ARGUMENT).release();
  }
}

// Written against the C API: Ort::ShapeInferContext::SetOutputShape (C++
// header, API 29) marks symbolic dimensions with the value -2, which ORT 1.30's
// SetDimensions rejects ("dim_values must be -1 ... or larger"), leaving every
// tensor downstream without a shape.
void set_float_shape_with_last_dim(OrtShapeInferContext* context, size_t in, size_t out, int64_t last_dim) {
  const OrtApi& api = Ort::GetApi();
  OrtTensorTypeAndShapeInfo* in_info = nullptr;  // owned by the context
  Ort::ThrowOnError(api.ShapeInferContext_GetInputTypeShape(context, in, &in_info));
  size_t rank = 0;
  Ort::ThrowOnError(api.GetDimensionsCount(in_info, &rank));
  if (rank == 0) return;  // rank unknown: leave the output's shape unknown
  std::vector<int64_t> dims(rank);
  std::vector<const char*> symbols(rank, nullptr);
  Ort::ThrowOnError(api.GetDimensions(in_info, dims.data(), rank));
  Ort::ThrowOnError(api.GetSymbolicDimensions(in_info, symbols.data(), rank));

  static std::atomic<int64_t> unknown_dims{0};
  std::vector<std::string> names(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (symbols[i] && *symbols[i]) {
      names[i] = symbols[i];
      dims[i] = -1;
    } else if (dims[i] < 0) {
      names[i] = "deltagen_unknown_" + std::to_string(unknown_dims++);
    }
  }
  dims.back() = last_dim;
  names.back().clear();

  std::vector<const char*> name_ptrs;
  for (const auto& name : names) name_ptrs.push_back(name.c_str());
  OrtTensorTypeAndShapeInfo* out_info = nullptr;
  Ort::ThrowOnError(api.CreateTensorTypeAndShapeInfo(&out_info));
  std::unique_ptr<OrtTensorTypeAndShapeInfo, void (*)(OrtTensorTypeAndShapeInfo*)> owner(
      out_info, [](OrtTensorTypeAndShapeInfo* p) { Ort::GetApi().ReleaseTensorTypeAndShapeInfo(p); });
  for (auto& d : dims) d = std::max<int64_t>(d, -1);
  Ort::ThrowOnError(api.SetTensorElementType(out_info, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT));
  Ort::ThrowOnError(api.SetDimensions(out_info, dims.data(), rank));
  Ort::ThrowOnError(api.SetSymbolicDimensions(out_info, name_ptrs.data(), rank));
  Ort::ThrowOnError(api.ShapeInferContext_SetOutputTypeShape(context, out, out_info));
}

const OrtOpAttr* optional_attribute(OrtShapeInferContext* context, const char* name) {
  const OrtApi& api = Ort::GetApi();
  const OrtOpAttr* attr = nullptr;
  if (OrtStatus* missing = api.ShapeInferContext_GetAttribute(context, name, &attr)) {
    api.ReleaseStatus(missing);
    return nullptr;
  }
  return attr;
}

int64_t int_attribute(const OrtOpAttr* attr) {
  int64_t value = 0;
  size_t read = 0;
  Ort::ThrowOnError(Ort::GetApi().ReadOpAttr(attr, ORT_OP_ATTR_INT, &value, sizeof value, &read));
  return value;
}

void ints_attribute(const OrtOpAttr* attr, int64_t* values, size_t count) {
  size_t read = 0;
  Ort::ThrowOnError(Ort::GetApi().ReadOpAttr(attr, ORT_OP_ATTR_INTS, values, count * sizeof(int64_t), &read));
  if (read != count * sizeof(int64_t))
    throw Ort::Exception("expected " + std::to_string(count) + " ints in an attribute", ORT_INVALID_ARGUMENT);
}

}  // namespace deltagen::ortext
