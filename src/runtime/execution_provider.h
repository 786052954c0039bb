// Putting a session on an execution provider other than the CPU, with
// errors that say what is missing and how to get it.
#pragma once
#include <memory>
#include <string>

#include <onnxruntime_cxx_api.h>

#include "deltagen/options.h"

namespace deltagen {

// ORT's provider name ("CPUExecutionProvider", "WebGpuExecutionProvider", ...),
// as GetAvailableProviders() and ORT's profile name them.
const char* ort_provider_name(ExecutionProvider ep);

// Appends `ep` (nothing for Cpu). Throws Error("execution provider <name>:
// ...") when this ONNX Runtime library does not contain it.
void append_execution_provider(Ort::SessionOptions& options, ExecutionProvider ep);

// The memory the model's state lives in on `ep` ("WebGPU_Buffer", "Cuda");
// nullptr for the CPU.
std::unique_ptr<Ort::MemoryInfo> device_memory_info(ExecutionProvider ep);

// ORT lists CUDA among its providers whenever it was built with it, but
// loads it from libonnxruntime_providers_shared.so and
// libonnxruntime_providers_cuda.so beside libonnxruntime.so (the npm CPU
// package has neither). The first of those that is missing, else "".
std::string missing_provider_library(ExecutionProvider ep);

// When creating a session on `ep` failed with `ort_message`: a one-line
// explanation if the cause is the provider's device (no WebGPU adapter, no
// CUDA driver), else "".
std::string execution_provider_failure(ExecutionProvider ep, const std::string& ort_message);

}  // namespace deltagen
