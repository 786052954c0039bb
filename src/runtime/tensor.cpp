#include "runtime/tensor.h"

#include <cstring>

#include "deltagen/error.h"
#include "util/half.h"

namespace deltagen {

size_t float_element_size(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return 2;
    default: fail("runtime", "unsupported tensor element type " + element_type_name(type));
  }
}

std::string element_type_name(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "float32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "float16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "bfloat16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return "float64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return "int64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "int32";
    default: return "element type " + std::to_string(int(type));
  }
}

std::vector<int64_t> tensor_shape(const Ort::Value& value) {
  return value.GetTensorTypeAndShapeInfo().GetShape();
}

std::vector<float> tensor_to_f32(const Ort::Value& value, size_t begin, size_t count) {
  auto info = value.GetTensorTypeAndShapeInfo();
  if (begin + count > info.GetElementCount()) fail("runtime", "tensor read out of range");
  std::vector<float> out(count);
  const void* raw = value.GetTensorRawData();
  switch (info.GetElementType()) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
      std::memcpy(out.data(), static_cast<const float*>(raw) + begin, count * sizeof(float));
      break;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: {
      const uint16_t* h = static_cast<const uint16_t*>(raw) + begin;
      for (size_t i = 0; i < count; ++i) out[i] = f16_to_f32(h[i]);
      break;
    }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: {
      const uint16_t* h = static_cast<const uint16_t*>(raw) + begin;
      for (size_t i = 0; i < count; ++i) out[i] = bf16_to_f32(h[i]);
      break;
    }
    default:
      fail("runtime", "cannot read a " + element_type_name(info.GetElementType()) + " tensor as float");
  }
  return out;
}

std::vector<float> tensor_to_f32(const Ort::Value& value) {
  return tensor_to_f32(value, 0, value.GetTensorTypeAndShapeInfo().GetElementCount());
}

}  // namespace deltagen
