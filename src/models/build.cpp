// build_model: checkpoint -> model folder (model.onnx [+ .data], genai_config.json, tokenizer files).
#include "models/build.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "checkpoint/generation_config.h"
#include "graph/onnx_writer.h"
#include "measure/graph_facts.h"
#include "models/precision_plan.h"
#include "models/quant_recipe.h"
#include "models/qwen35.h"
#include "models/qwen35_vision.h"
#include "util/atomic_file.h"
#include "deltagen/error.h"

namespace deltagen {
namespace fs = std::filesystem;

namespace {

constexpr const char* kModelFile = "model.onnx";
constexpr const char* kVisionFile = "vision.onnx";
constexpr const char* kEmbeddingFile = "embedding.onnx";
constexpr const char* kMtpFile = "mtp.onnx";

// The EOS ids of config.json, then those generation_config.json adds.
std::vector<int64_t> all_eos_ids(const ModelConfig& cfg, const std::optional<GenerationDefaults>& gen) {
  std::vector<int64_t> ids = cfg.eos_token_ids;
  if (gen)
    for (int64_t id : gen->eos_token_ids)
      if (id >= 0 && id < cfg.vocab_size && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  return ids;
}

// onnxruntime-genai's form: [{"webgpu": {}}]; the CPU is its default, an empty list.
nlohmann::json provider_options(ExecutionProvider target) {
  if (target == ExecutionProvider::Cpu) return nlohmann::json::array();
  return nlohmann::json::array({{{execution_provider_name(target), nlohmann::json::object()}}});
}

// A VL build's "vision" and "embedding" sections and token ids, in
// onnxruntime-genai's multimodal form; the decoder reads inputs_embeds.
void add_vision_sections(const ModelConfig& cfg, const BuildOptions& opts, nlohmann::json& model) {
  using nlohmann::json;
  const VisionConfig& v = *cfg.vision;
  const json session = {{"log_id", "onnxruntime-genai"}, {"provider_options", provider_options(opts.target)}};
  model["type"] = "qwen3_5";
  model["image_token_id"] = cfg.image_token_id;
  if (cfg.video_token_id >= 0) model["video_token_id"] = cfg.video_token_id;
  model["vision_start_token_id"] = cfg.vision_start_token_id;
  model["vision_end_token_id"] = cfg.vision_end_token_id;
  model["vision"] = {{"filename", kVisionFile},
                     {"session_options", session},
                     {"spatial_merge_size", v.spatial_merge_size},
                     {"patch_size", v.patch_size},
                     {"temporal_patch_size", v.temporal_patch_size},
                     {"inputs", {{"pixel_values", vision_io::kPixelValues}, {"image_grid_thw", vision_io::kImageGridThw}}},
                     {"outputs", {{"image_features", vision_io::kImageFeatures}}}};
  model["embedding"] = {{"filename", kEmbeddingFile},
                        {"session_options", session},
                        {"inputs", {{"input_ids", io::kInputIds}, {"image_features", vision_io::kImageFeatures}}},
                        {"outputs", {{"inputs_embeds", io::kInputsEmbeds}}}};
  model["decoder"]["inputs"].erase("input_ids");
  model["decoder"]["inputs"]["inputs_embeds"] = io::kInputsEmbeds;
}

// The head's section (a build with mtp.onnx) and the decoder's extra output.
void add_mtp_section(const ModelConfig& cfg, const BuildOptions& opts, nlohmann::json& model) {
  model["decoder"]["outputs"]["hidden_states"] = io::kHiddenStates;
  model["mtp"] = {{"filename", kMtpFile},
                  {"session_options", {{"log_id", "onnxruntime-genai"}, {"provider_options", provider_options(opts.target)}}},
                  {"num_hidden_layers", cfg.mtp_num_hidden_layers},
                  {"draft_vocab_size", opts.mtp_draft_vocab > 0 ? std::min(opts.mtp_draft_vocab, cfg.vocab_size)
                                                                : cfg.vocab_size},
                  {"inputs",
                   {{"input_ids", io::kInputIds},
                    {"hidden_states", io::kHiddenStates},
                    {"attention_mask", io::kAttentionMask},
                    {"position_ids", io::kPositionIds},
                    {"past_key_names", "past_key_values.%d.key"},
                    {"past_value_names", "past_key_values.%d.value"}}},
                  {"outputs",
                   {{"logits", io::kLogits},
                    {"hidden_states", io::kMtpHiddenOut},
                    {"present_key_names", "present.%d.key"},
                    {"present_value_names", "present.%d.value"}}}};
}

// onnxruntime-genai's genai_config.json (model + search sections) for the
// text-only model. "search" carries generation_config.json's sampling (greedy
// without one), as onnxruntime-genai's builder does.
nlohmann::json genai_config(const ModelConfig& cfg, const BuildOptions& opts, int64_t context_length,
                            const std::optional<GenerationDefaults>& gen, bool mtp) {
  using nlohmann::json;
  json model = {
      {"context_length", context_length},
      {"type", "qwen3_5_text"},
      {"vocab_size", cfg.vocab_size},
      {"decoder",
       {{"session_options", {{"log_id", "onnxruntime-genai"}, {"provider_options", provider_options(opts.target)}}},
        {"filename", kModelFile},
        {"head_size", cfg.head_dim},
        {"hidden_size", cfg.hidden_size},
        {"num_attention_heads", cfg.num_attention_heads},
        {"num_hidden_layers", cfg.num_hidden_layers},
        {"num_key_value_heads", cfg.num_key_value_heads},
        {"inputs",
         {{opts.exclude_embeds ? "inputs_embeds" : "input_ids", opts.exclude_embeds ? io::kInputsEmbeds : io::kInputIds},
          {"attention_mask", io::kAttentionMask},
          {"position_ids", io::kPositionIds},
          {"past_key_names", "past_key_values.%d.key"},
          {"past_value_names", "past_key_values.%d.value"}}},
        {"outputs",
         {{opts.exclude_lm_head ? "hidden_states" : "logits", opts.exclude_lm_head ? io::kHiddenStates : io::kLogits},
          {"present_key_names", "present.%d.key"},
          {"present_value_names", "present.%d.value"}}}}},
  };
  // As upstream: one eos id is written as a number, several as a list; pad
  // falls back to the (first) eos id; bos is left out when the model has none.
  const std::vector<int64_t> eos = all_eos_ids(cfg, gen);
  if (eos.size() == 1) model["eos_token_id"] = eos[0];
  else if (!eos.empty()) model["eos_token_id"] = eos;
  if (cfg.bos_token_id >= 0) model["bos_token_id"] = cfg.bos_token_id;
  if (cfg.pad_token_id >= 0) model["pad_token_id"] = cfg.pad_token_id;
  else if (!eos.empty()) model["pad_token_id"] = eos[0];

  json search = {
      {"diversity_penalty", 0.0},   {"do_sample", false},   {"early_stopping", true},
      {"length_penalty", 1.0},      {"max_length", context_length}, {"min_length", 0},
      {"no_repeat_ngram_size", 0},  {"num_beams", 1},       {"num_return_sequences", 1},
      {"past_present_share_buffer", true}, {"repetition_penalty", 1.0}, {"temperature", 1.0},
      {"top_k", 1},                 {"top_p", 1.0},
  };
  if (gen) {
    search["do_sample"] = gen->do_sample;
    if (gen->temperature) search["temperature"] = *gen->temperature;
    if (gen->top_k) search["top_k"] = *gen->top_k;
    if (gen->top_p) search["top_p"] = *gen->top_p;
    if (gen->min_p) search["min_p"] = *gen->min_p;
    if (gen->repetition_penalty) search["repetition_penalty"] = *gen->repetition_penalty;
    if (gen->presence_penalty) search["presence_penalty"] = *gen->presence_penalty;
  }
  if (opts.vision) add_vision_sections(cfg, opts, model);
  if (mtp) add_mtp_section(cfg, opts, model);
  return {{"model", model}, {"search", search}};
}

// "\rwriting weights: 42% (1.3 / 3.2 GB)" on a terminal; silent otherwise.
std::function<void(int64_t, int64_t)> progress_printer(bool enabled) {
  if (!enabled || !::isatty(STDERR_FILENO)) return nullptr;
  auto last = std::make_shared<int>(-1);
  return [last](int64_t done, int64_t total) {
    int percent = total > 0 ? int(done * 100 / total) : 100;
    if (percent == *last) return;
    *last = percent;
    std::fprintf(stderr, "\rconverting and writing weights: %3d%% (%.2f / %.2f GB)", percent, double(done) / 1e9,
                 double(total) / 1e9);
    if (done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

}  // namespace

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::Fp32: return "fp32";
    case Precision::Fp16: return "fp16";
    case Precision::Bf16: return "bf16";
    case Precision::Int4: return "int4";
    case Precision::Int8: return "int8";
  }
  return "?";
}

const char* float_type_name(FloatType type) {
  switch (type) {
    case FloatType::Fp32: return "fp32";
    case FloatType::Fp16: return "fp16";
    case FloatType::Bf16: return "bf16";
  }
  return "?";
}

const char* l2norm_name(L2Norm form) {
  switch (form) {
    case L2Norm::LpNorm: return "lpnorm";
    case L2Norm::LpNormEps: return "lpnorm-eps";
    case L2Norm::Decomposed: return "decomposed";
  }
  return "?";
}

BuildOptions normalized_build_options(BuildOptions opts) {
  validate_build_options(opts);
  return opts;
}

// The longest context a build accepts: the rotary cos/sin tables hold
// rotary_dim floats per position. 4x Qwen3.5's native 262,144 positions.
constexpr int64_t kMaxContextLength = int64_t(1) << 20;

void validate_build_options(const BuildOptions& opts) {
  plan_precision(opts);
  if (opts.prune_lm_head && opts.exclude_lm_head)
    fail("--prune-lm-head", "has no lm_head to prune with --exclude-lm-head");
  if (opts.context_length < 0)
    fail("--context-length", "must be positive, got " + std::to_string(opts.context_length));
  if (opts.context_length > kMaxContextLength)
    fail("--context-length", std::to_string(opts.context_length) + " is more than the supported " +
                                 std::to_string(kMaxContextLength));
  if (opts.external_data_threshold < 0) fail("build", "external_data_threshold must not be negative");
  if (opts.threads < 0) fail("--threads", "must not be negative, got " + std::to_string(opts.threads));
  if (opts.vision_precision != Precision::Fp32 && !is_quantized(opts.vision_precision))
    fail("--vision-precision", std::string("'") + precision_name(opts.vision_precision) +
                                   "' is not offered (fp32, int8 or int4)");
  if (opts.vision_precision != Precision::Fp32 && !opts.vision) fail("--vision-precision", "needs --vision");
  if (opts.vision && opts.exclude_embeds)
    fail("--vision", "already takes inputs_embeds (from embedding.onnx); leave out --exclude-embeds");
  validate_quantization_options(opts);
}

BuildReport build_model(const Checkpoint& ckpt, const BuildOptions& requested, const fs::path& out_dir) {
  const BuildOptions opts = normalized_build_options(requested);
  const ModelConfig& cfg = ckpt.config();
  BuildReport report;
  report.context_length = opts.context_length > 0 ? opts.context_length : cfg.max_position_embeddings;
  if (report.context_length <= 0)
    fail(ckpt.dir().string(), "config has no max_position_embeddings; pass --context-length");
  if (report.context_length > kMaxContextLength)
    fail(ckpt.dir().string(), "config.json's max_position_embeddings " + std::to_string(report.context_length) +
                                  " is more than the supported context " + std::to_string(kMaxContextLength) +
                                  "; pass a shorter --context-length");

  if (opts.vision && !ckpt.has_vision())
    fail("--vision", ckpt.dir().string() + " has no vision tower (config.json's vision_config and visual.* tensors)");

  if (opts.mtp_draft_vocab > 0) {
    if (!builds_mtp_head(ckpt, opts) || opts.exclude_lm_head)
      fail("--mtp-draft-vocab", ckpt.dir().string() + " builds no multi-token-prediction head (mtp.* tensors)");
    if (opts.mtp_draft_vocab > ckpt.config().vocab_size)
      fail("--mtp-draft-vocab", std::to_string(opts.mtp_draft_vocab) + " is more than the vocabulary's " +
                                    std::to_string(ckpt.config().vocab_size) + " tokens");
  }

  // Calibration and the mixed plan run before anything is written.
  const QuantRecipe recipe = prepare_quantization(ckpt, opts, plan_precision(opts));
  BuildOptions decoder_opts = opts;
  decoder_opts.exclude_embeds |= opts.vision;
  graph::GraphBuilder builder("main_graph");
  build_qwen35_graph(ckpt, decoder_opts, report.context_length, builder, recipe);
  report.node_count = builder.graph().node_size();

  AtomicDir dir(out_dir);
  // Each model file (decoder, and with --vision the tower and the embedding),
  // its weights converted as it is written; the decoder's show progress.
  auto write = [&](graph::GraphBuilder& b, const char* file, bool progress) {
    onnx::ModelProto model = graph::make_model(b, {{"", 21}, {graph::kMsDomain, 1}}, 10, "deltagen");
    graph::WriteOptions wopts;
    wopts.external_data_threshold = opts.external_data_threshold;
    if (progress) wopts.progress = progress_printer(opts.show_progress);
    graph::WriteResult written = graph::write_model(std::move(model), b.take_initializers(), dir.path() / file, wopts);
    report.weight_bytes += written.weight_bytes;
    return written;
  };
  report.external_data = write(builder, kModelFile, true).external;
  if (opts.vision) {
    graph::GraphBuilder vision("vision_graph"), embedding("embedding_graph");
    build_qwen35_vision_graph(ckpt, opts, vision);
    build_qwen35_embedding_graph(ckpt, opts, embedding, recipe);
    write(vision, kVisionFile, false);
    write(embedding, kEmbeddingFile, false);
  }
  const bool mtp = builds_mtp_head(ckpt, opts) && !opts.exclude_lm_head;
  if (mtp) {
    graph::GraphBuilder head("mtp_graph");
    build_qwen35_mtp_graph(ckpt, opts, report.context_length, head, recipe);
    write(head, kMtpFile, false);
  }

  const std::optional<GenerationDefaults> gen = read_generation_config(ckpt.dir());
  write_file_atomic(dir.path() / "genai_config.json",
                    genai_config(cfg, opts, report.context_length, gen, mtp).dump(4) + "\n");
  if (!recipe.report.is_null()) {
    // What the model stores and what a decoded token reads, counted on the written graph.
    nlohmann::json report = recipe.report;
    report["weights"] = measure::weight_counts_json(measure::graph_facts(dir.path() / kModelFile));
    write_file_atomic(dir.path() / "quantization.json", report.dump(2) + "\n");
  }
  copy_files_into(ckpt.tokenizer_files(), dir.path());
  dir.commit();
  return report;
}

}  // namespace deltagen
