// Optional attributes of a custom op's node: ORT's KernelInfo::GetAttribute
// throws when the node does not set one.
#pragma once
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

}  // namespace deltagen::ortext
