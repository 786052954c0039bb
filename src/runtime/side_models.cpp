// The models beside the decoder. A --vision build's two (models/qwen35_vision.h):
// embedding.onnx turns ids and image features into the decoder's
// inputs_embeds, vision.onnx one preprocessed image into its features. A
// build with the checkpoint's MTP head: mtp.onnx (models/qwen35_mtp.cpp),
// which speculative/mtp_draft.h runs.
#include <algorithm>

#include "deltagen/error.h"
#include "ortext/fast_session.h"
#include "ortext/released_weights.h"
#include "runtime/session.h"

namespace deltagen {
namespace fs = std::filesystem;

namespace {

const char* const kEmbeddingInputs[] = {"input_ids", "image_features"};
const char* const kEmbeddingOutput = "inputs_embeds";
const char* const kVisionInputs[] = {"pixel_values", "image_grid_thw"};
const char* const kVisionOutput = "image_features";

std::unique_ptr<Ort::Session> open_session(const fs::path& file, const Ort::SessionOptions& options,
                                           bool fast_kernels) {
  if (!fs::is_regular_file(file)) fail(file.string(), "model file not found (genai_config.json names it)");
  try {
    if (!fast_kernels) return std::make_unique<Ort::Session>(ort_env(), file.c_str(), options);
    rewrite::RewriteSummary rewritten;
    auto session = std::make_unique<Ort::Session>(
        ortext::create_session_with_fast_kernels(ort_env(), file, options, &rewritten, {.fusions = false}));
    if (rewritten.released > 0) ortext::release_clean_file_pages(file.string() + ".data");
    return session;
  } catch (const Ort::Exception& e) {
    fail(file.string(), "ONNX Runtime cannot load it: " + ort_error_line(e));
  }
}

void expect_io(const Ort::Session& s, const fs::path& file, const std::vector<std::string>& inputs,
               const std::string& output) {
  const auto in = s.GetInputNames();
  const auto out = s.GetOutputNames();
  for (const auto& name : inputs)
    if (std::find(in.begin(), in.end(), name) == in.end()) fail(file.string(), "has no input " + name);
  if (std::find(out.begin(), out.end(), output) == out.end()) fail(file.string(), "has no output " + output);
}

}  // namespace

void Model::load_side_models(const Ort::SessionOptions& options, bool fast_kernels) {
  // vision.onnx waits for the first image and mtp.onnx for the first draft: a
  // conversation without them neither loads nor holds them (the tower is
  // 0.4 GB in fp32 on the 0.8B shape).
  side_options_ = options.Clone();
  side_fast_kernels_ = fast_kernels;
  if (!config_.has_vision()) return;
  if (!io_.has_inputs_embeds || !io_.mrope_positions)
    fail((dir_ / config_.model_filename).string(),
         "genai_config.json has vision sections, but the decoder does not take inputs_embeds and 3-D position_ids");
  const fs::path embedding_file = dir_ / config_.embedding_filename;
  const fs::path vision_file = dir_ / config_.vision_filename;
  if (!fs::is_regular_file(vision_file)) fail(vision_file.string(), "model file not found (genai_config.json names it)");
  embedding_ = open_session(embedding_file, options, false);
  expect_io(*embedding_, embedding_file, {kEmbeddingInputs[0], kEmbeddingInputs[1]}, kEmbeddingOutput);
  // The features' width is the text model's hidden size.
  auto shape = embedding_->GetInputTypeInfo(1).GetTensorTypeAndShapeInfo().GetShape();
  if (shape.size() != 2 || shape[1] <= 0) fail(embedding_file.string(), "image_features must be [rows, hidden]");
  hidden_size_ = shape[1];
}

Ort::Session& Model::vision_session() {
  std::lock_guard lock(side_mutex_);
  if (!vision_) {
    const fs::path vision_file = dir_ / config_.vision_filename;
    vision_ = open_session(vision_file, side_options_, side_fast_kernels_);
    expect_io(*vision_, vision_file, {kVisionInputs[0], kVisionInputs[1]}, kVisionOutput);
  }
  return *vision_;
}

Ort::Session& Model::mtp_session() {
  std::lock_guard lock(side_mutex_);
  if (!mtp_) {
    if (!config_.has_mtp())
      fail(dir_.string(), "has no multi-token-prediction head (mtp.onnx): its checkpoint has no mtp.* tensors, "
                          "or it was built with --no-mtp");
    if (ep_ != ExecutionProvider::Cpu)
      fail("--speculative mtp", std::string("the head drafts on the CPU provider only, not on ") +
                                    execution_provider_name(ep_));
    // The head runs between the decoder's runs, on a thread pool of its own:
    // its threads must sleep, not spin, once a run is over, or they take the
    // cores from the decoder's next run (measured: a round of 3 guesses and
    // their check took 64 ms spinning, against 41 ms).
    Ort::SessionOptions options = side_options_.Clone();
    make_idle_threads_sleep(options);
    mtp_ = open_session(dir_ / config_.mtp_filename, options, side_fast_kernels_);
  }
  return *mtp_;
}

Ort::Value Model::embed(const int64_t* ids, int64_t batch, int64_t seq, const float* features, int64_t rows) {
  if (!embedding_) fail(dir_.string(), "the model has no embedding.onnx (not built with --vision)");
  auto cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  const std::array<int64_t, 2> ids_shape = {batch, seq}, feature_shape = {rows, hidden_size_};
  static float no_features = 0;  // a [0, hidden] tensor still needs a pointer
  Ort::Value inputs[] = {
      Ort::Value::CreateTensor<int64_t>(cpu, const_cast<int64_t*>(ids), size_t(batch * seq), ids_shape.data(), 2),
      Ort::Value::CreateTensor<float>(cpu, rows ? const_cast<float*>(features) : &no_features,
                                      size_t(rows * hidden_size_), feature_shape.data(), 2)};
  try {
    auto out = embedding_->Run(Ort::RunOptions{nullptr}, kEmbeddingInputs, inputs, 2, &kEmbeddingOutput, 1);
    return std::move(out[0]);
  } catch (const Ort::Exception& e) {
    fail("embedding model run", ort_error_line(e));
  }
}

std::vector<float> Model::encode_image(const float* pixels, int64_t patches, int64_t patch_dim,
                                       const std::array<int64_t, 3>& grid) {
  if (!has_vision()) fail(dir_.string(), "the model has no vision.onnx (not built with --vision)");
  Ort::Session& vision = vision_session();
  auto cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  std::array<int64_t, 3> grid_copy = grid;
  const std::array<int64_t, 2> pixel_shape = {patches, patch_dim}, grid_shape = {1, 3};
  Ort::Value inputs[] = {
      Ort::Value::CreateTensor<float>(cpu, const_cast<float*>(pixels), size_t(patches * patch_dim),
                                      pixel_shape.data(), 2),
      Ort::Value::CreateTensor<int64_t>(cpu, grid_copy.data(), 3, grid_shape.data(), 2)};
  try {
    auto out = vision.Run(Ort::RunOptions{nullptr}, kVisionInputs, inputs, 2, &kVisionOutput, 1);
    const float* f = out[0].GetTensorData<float>();
    return std::vector<float>(f, f + out[0].GetTensorTypeAndShapeInfo().GetElementCount());
  } catch (const Ort::Exception& e) {
    fail("vision model run", ort_error_line(e));
  }
}

}  // namespace deltagen
