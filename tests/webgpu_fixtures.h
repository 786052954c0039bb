// The WebGPU tests' models: tiny-a built fp32, fp16 and q4f16, each built
// once per test process, and loaded once per process on each execution
// provider (a WebGPU session costs seconds: shaders compile on the first).
//
// The sanitizer build (DELTAGEN_SANITIZE) runs these tests too: LeakSanitizer
// finds nothing of Mesa's or Dawn's beyond the libonnxruntime.so suppression
// of fuzz/sanitizer_defaults.cpp (checked by preloading libasan.so into the
// plain build with the same options: no report), so nothing is skipped there.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "models/build.h"
#include "runtime/execution_provider.h"
#include "runtime/session.h"
#include "runtime_fixtures.h"
#include "test_util.h"

namespace deltagen::test {

constexpr int64_t kMaxLength = 64;  // every sequence of the WebGPU tests is shorter

// tiny-a built with `options` into a folder that lives as long as the process.
inline std::filesystem::path built_once(const std::string& name, const BuildOptions& options) {
  static TempDir dir;
  static std::map<std::string, std::filesystem::path> built;
  auto [it, fresh] = built.try_emplace(name, dir / name);
  if (fresh) build_model(*Checkpoint::open(golden_checkpoint()), options, it->second);
  return it->second;
}

inline const std::filesystem::path& fp32_dir() { return golden_model_dir(); }
inline std::filesystem::path fp16_dir() {
  return built_once("fp16", BuildOptions{.precision = Precision::Fp16, .show_progress = false});
}
inline std::filesystem::path q4f16_dir() {  // upstream's q4f16 graph: int4 weights, fp16 activations
  return built_once("q4f16", BuildOptions{.precision = Precision::Int4, .activations = FloatType::Fp16,
                                          .show_progress = false});
}

// `dir` loaded on `ep`, once per process (a WebGPU session costs seconds).
// nullptr, with a test failure that says why, when it cannot be loaded; a
// WebGPU failure is remembered so that later tests fail at once with it.
inline Model* loaded(const std::filesystem::path& dir, ExecutionProvider ep = ExecutionProvider::WebGpu) {
  ort_env();  // made first, so that it outlives the sessions below at exit
  static std::map<std::pair<std::filesystem::path, ExecutionProvider>, std::unique_ptr<Model>> models;
  static std::string webgpu_failure;
  if (ep == ExecutionProvider::WebGpu && !webgpu_failure.empty()) {
    ADD_FAILURE() << webgpu_failure;
    return nullptr;
  }
  auto& model = models[{dir, ep}];
  if (model) return model.get();
  try {
    model = Model::load(dir, RuntimeOptions{.intra_op_threads = 1, .ep = ep});
  } catch (const std::exception& e) {
    std::string why = std::string("cannot run ") + dir.filename().string() + " on " + execution_provider_name(ep) +
                      ": " + e.what();
    if (ep == ExecutionProvider::WebGpu) {
      why += " -- the WebGPU tests need ONNX Runtime's WebGPU provider and an adapter: run scripts/setup_webgpu.sh "
             "(make test does)";
      webgpu_failure = why;
    }
    ADD_FAILURE() << why;
    return nullptr;
  }
  return model.get();
}

}  // namespace deltagen::test
