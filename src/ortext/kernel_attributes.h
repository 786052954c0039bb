// Optional attributes of a custom op's node: ORT's KernelInfo::GetAttribute
// throws when the node does not set one.
#pragma once
#include <vector>

#include <onnxruntime_cxx_api.h>

namespace deltagen::ortext {

template <typename T>
T attribute_or(const Ort::ConstKernelInfo& info, const char* name, T fallback) {
  try {
    return info.GetAttribute<T>(name);
  } catch (const Ort::Exception&) {
    return fallback;
  }
}

// A list attribute, empty when the node does not set it.
template <typename T>
std::vector<T> attributes_or_empty(const Ort::ConstKernelInfo& info, const char* name) {
  try {
    return info.GetAttributes<T>(name);
  } catch (const Ort::Exception&) {
    return {};
  }
}

}  // namespace deltagen::ortext
