// One call for the runtime: an ONNX Runtime session for a model file in which
// every MatMulNBits that deltagen's kernels support runs on them.
//
//   Ort::Session s = ortext::create_session_with_fast_kernels(env, dir / "model.onnx", options);
//
// The model is read with the onnx protobuf classes, rewritten in memory
// (model_rewrite.h) and handed to ORT as bytes, with the session option
// session.model_external_initializers_file_folder_path pointing at the model's
// folder so model.onnx.data is still found (and memory-mapped) as usual.
// Nothing to rewrite, or DELTAGEN_KERNELS=ort in the environment: a stock
// session straight from the file.
#pragma once
#include <filesystem>

#include <onnxruntime_cxx_api.h>

#include "rewrite/model_rewrite.h"

namespace deltagen::ortext {

// True unless DELTAGEN_KERNELS=ort is set (read at every call).
bool fast_kernels_enabled_by_environment();

// `options` is copied, not modified (do not register the deltagen domain on it
// yourself). `summary`, when given, says what was rewritten. Throws
// Ort::Exception from ORT, Error for an unreadable model file.
Ort::Session create_session_with_fast_kernels(Ort::Env& env, const std::filesystem::path& model_onnx,
                                              const Ort::SessionOptions& options,
                                              rewrite::RewriteSummary* summary = nullptr,
                                              const rewrite::RewriteOptions& rewrite_options = {});

}  // namespace deltagen::ortext
