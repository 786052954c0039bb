#include "runtime/execution_provider.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "deltagen/error.h"

namespace deltagen {

const char* execution_provider_name(ExecutionProvider ep) {
  switch (ep) {
    case ExecutionProvider::Cpu: return "cpu";
    case ExecutionProvider::WebGpu: return "webgpu";
    case ExecutionProvider::Cuda: return "cuda";
  }
  return "?";
}

ExecutionProvider parse_execution_provider(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (lower == "cpu") return ExecutionProvider::Cpu;
  if (lower == "webgpu") return ExecutionProvider::WebGpu;
  if (lower == "cuda") return ExecutionProvider::Cuda;
  fail("execution provider", "expected cpu, webgpu or cuda, not '" + name + "'");
}

const char* ort_provider_name(ExecutionProvider ep) {
  switch (ep) {
    case ExecutionProvider::Cpu: return "CPUExecutionProvider";
    case ExecutionProvider::WebGpu: return "WebGpuExecutionProvider";
    case ExecutionProvider::Cuda: return "CUDAExecutionProvider";
  }
  return "?";
}

namespace {

const char* how_to_get(ExecutionProvider ep) {
  switch (ep) {
    case ExecutionProvider::WebGpu:
      return "use ONNX Runtime 1.30 from npm's onnxruntime-node, which scripts/setup.sh installs";
    case ExecutionProvider::Cuda:
      return "use an ONNX Runtime build with CUDA (npm com.github.asus4.onnxruntime.linux-x64-gpu with its "
             "matching core library; scripts/device_check.sh sets one up) and CUDA 13";
    case ExecutionProvider::Cpu: break;
  }
  return "";
}

// Mesa prints an error on every start without it; any private folder will do.
void ensure_xdg_runtime_dir() {
  if (const char* dir = std::getenv("XDG_RUNTIME_DIR"); dir && *dir) return;
  const std::string dir = "/tmp/deltagen-runtime-" + std::to_string(getuid());
  mkdir(dir.c_str(), 0700);
  setenv("XDG_RUNTIME_DIR", dir.c_str(), 0);
}

// The folder of the libonnxruntime.so.1 this process runs on ("" if unknown):
// ORT loads its shared provider libraries from there.
std::string ort_library_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&OrtGetApiBase), &info) || !info.dli_fname) return "";
  const std::string path = info.dli_fname;
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// ORT builds without CUDA built in (the npm CPU packages, the Unity 1.29 core
// that com.github.asus4.onnxruntime.linux-x64-gpu pairs with) leave
// CUDAExecutionProvider out of GetAvailableProviders() and refuse
// CreateCUDAProviderOptions, yet load libonnxruntime_providers_cuda.so from
// their own folder through the legacy OrtCUDAProviderOptions entry point. So
// for CUDA the test is that file (missing_provider_library, before this);
// present but unloadable (no libcuda.so.1, no CUDA 13 libraries) -> the
// loader's reason.
void append_cuda(Ort::SessionOptions& options) {
  const std::string dir = ort_library_dir();
  const std::string provider = (dir.empty() ? "" : dir + "/") + "libonnxruntime_providers_cuda.so";
  if (access(provider.c_str(), R_OK) == 0) {
    if (void* handle = dlopen(provider.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
      dlclose(handle);
    } else {
      const char* why = dlerror();
      fail("execution provider cuda", "CUDA cannot start: " + std::string(why ? why : "the provider library does not load") +
                                          " (it needs an NVIDIA GPU, its driver and CUDA 13's libraries: cudart, "
                                          "cublas, cublasLt, curand, on the library path)");
    }
  }
  OrtCUDAProviderOptionsV2* cuda = nullptr;
  if (OrtStatus* status = Ort::GetApi().CreateCUDAProviderOptions(&cuda)) {
    Ort::GetApi().ReleaseStatus(status);  // "not enabled in this build": the legacy entry point below
    OrtCUDAProviderOptions legacy{};
    options.AppendExecutionProvider_CUDA(legacy);
    return;
  }
  std::unique_ptr<OrtCUDAProviderOptionsV2, void (*)(OrtCUDAProviderOptionsV2*)> owned(
      cuda, [](OrtCUDAProviderOptionsV2* p) { Ort::GetApi().ReleaseCUDAProviderOptions(p); });
  options.AppendExecutionProvider_CUDA_V2(*cuda);
}

}  // namespace

std::string missing_provider_library(ExecutionProvider ep) {
  if (ep != ExecutionProvider::Cuda) return "";
  // ORT looks beside itself: the library that holds its API table.
  const std::string found = ort_library_dir();
  if (found.empty()) return "";
  const std::filesystem::path dir = found;
  for (const char* name : {"libonnxruntime_providers_shared.so", "libonnxruntime_providers_cuda.so"})
    if (!std::filesystem::exists(dir / name)) return name;
  return "";
}

void append_execution_provider(Ort::SessionOptions& options, ExecutionProvider ep) {
  if (ep == ExecutionProvider::Cpu) return;
  const std::string name = execution_provider_name(ep);
  const auto available = Ort::GetAvailableProviders();
  const bool listed = std::find(available.begin(), available.end(), ort_provider_name(ep)) != available.end();
  if (!listed && ep != ExecutionProvider::Cuda)
    fail("execution provider " + name, std::string("this ONNX Runtime library does not contain it: ") + how_to_get(ep));
  // Checked here rather than left to ORT, whose error only says "Failed to
  // load shared library" after logging the details on stderr.
  if (const std::string lib = missing_provider_library(ep); !lib.empty())
    fail("execution provider " + name,
         "this ONNX Runtime library does not contain it (no " + lib + " beside it): " + how_to_get(ep));
  try {
    if (ep == ExecutionProvider::WebGpu) {
      ensure_xdg_runtime_dir();
      options.AppendExecutionProvider("WebGPU", {});
    } else {
      append_cuda(options);
    }
  } catch (const Ort::Exception& e) {
    std::string text = e.what();
    std::replace(text.begin(), text.end(), '\n', ' ');
    const std::string why = execution_provider_failure(ep, text);
    fail("execution provider " + name, why.empty() ? "ONNX Runtime cannot add it: " + text : why);
  }
}

std::unique_ptr<Ort::MemoryInfo> device_memory_info(ExecutionProvider ep) {
  switch (ep) {
    case ExecutionProvider::Cpu: return nullptr;
    case ExecutionProvider::WebGpu:
      return std::make_unique<Ort::MemoryInfo>("WebGPU_Buffer", OrtDeviceAllocator, 0, OrtMemTypeDefault);
    case ExecutionProvider::Cuda: return std::make_unique<Ort::MemoryInfo>("Cuda", OrtDeviceAllocator, 0, OrtMemTypeDefault);
  }
  return nullptr;
}

std::string execution_provider_failure(ExecutionProvider ep, const std::string& ort_message) {
  auto says = [&](const char* s) { return ort_message.find(s) != std::string::npos; };
  if (ep == ExecutionProvider::WebGpu && (says("adapter") || says("Adapter") || says("Vulkan")))
    return "no WebGPU adapter: ONNX Runtime's WebGPU needs a Vulkan driver: a GPU's, or on a machine without one "
           "Mesa's lavapipe >= 23 (Debian 12: scripts/setup_webgpu.sh installs it from bookworm-backports)";
  if (ep == ExecutionProvider::Cuda && (says("libcuda") || says("libcudart") || says("libcublas") ||
                                        says("CUDA driver") || says("cudaError") || says("providers_cuda") ||
                                        // the provider library is there, so what failed to load is CUDA's
                                        says("Failed to load shared library")))
    return "CUDA cannot start: it needs an NVIDIA GPU, its driver and CUDA 13's libraries (cudart, cublas) on the "
           "library path";
  return "";
}

}  // namespace deltagen
