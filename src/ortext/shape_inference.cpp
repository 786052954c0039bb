#include "ortext/shape_inference.h"

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

}  // namespace deltagen::ortext
