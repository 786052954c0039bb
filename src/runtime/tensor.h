// Small helpers around Ort::Value for the runtime: allocating zero-filled
// tensors, reading shapes and copying any float-like tensor out as fp32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <onnxruntime_cxx_api.h>

namespace deltagen {

// Bytes per element of the float types a model's state may use
// (float, float16, bfloat16); throws Error for anything else.
size_t float_element_size(ONNXTensorElementDataType type);
std::string element_type_name(ONNXTensorElementDataType type);

std::vector<int64_t> tensor_shape(const Ort::Value& value);

// Elements [begin, begin + count) of a float/float16/bfloat16 tensor as fp32.
std::vector<float> tensor_to_f32(const Ort::Value& value, size_t begin, size_t count);
std::vector<float> tensor_to_f32(const Ort::Value& value);

}  // namespace deltagen
