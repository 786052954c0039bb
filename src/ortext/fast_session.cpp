#include "ortext/fast_session.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "ortext/deltagen_ops.h"
#include "deltagen/error.h"

namespace deltagen::ortext {
namespace fs = std::filesystem;

Ort::Session create_session_with_fast_kernels(Ort::Env& env, const fs::path& model_onnx,
                                              const Ort::SessionOptions& options, rewrite::RewriteSummary* summary,
                                              const rewrite::RewriteOptions& rewrite_options) {
  if (summary) *summary = {};

  std::ifstream in(model_onnx, std::ios::binary);
  if (!in) fail(model_onnx.string(), "cannot open");
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes.str())) fail(model_onnx.string(), "not an ONNX model");

  rewrite::RewriteOptions rewrite = rewrite_options;
  if (options.HasConfigEntry(kConfigReleaseWeights) && options.GetConfigEntry(kConfigReleaseWeights) == "0")
    rewrite.release_weights = false;
  const rewrite::RewriteSummary result = rewrite::use_deltagen_kernels(model, rewrite);
  if (summary) *summary = result;
  if (result.deltagen_nodes() == 0) return Ort::Session(env, model_onnx.c_str(), options);

  const std::string rewritten = model.SerializeAsString();
  Ort::SessionOptions session_options = options.Clone();
  register_deltagen_ops(session_options);
  const fs::path folder = model_onnx.has_parent_path() ? model_onnx.parent_path() : fs::path(".");
  session_options.AddConfigEntry("session.model_external_initializers_file_folder_path", folder.c_str());
  return Ort::Session(env, rewritten.data(), rewritten.size(), session_options);
}

}  // namespace deltagen::ortext
