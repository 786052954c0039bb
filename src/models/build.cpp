// build_model: checkpoint -> model folder (model.onnx [+ .data], genai_config.json, tokenizer files).
#include "models/build.h"

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "graph/onnx_writer.h"
#include "models/qwen35.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace deltagen {
namespace fs = std::filesystem;

namespace {

constexpr const char* kModelFile = "model.onnx";

// onnxruntime-genai's genai_config.json (model + search sections) for the text-only model.
nlohmann::json genai_config(const ModelConfig& cfg, int64_t context_length) {
  using nlohmann::json;
  json model = {
      {"context_length", context_length},
      {"type", "qwen3_5_text"},
      {"vocab_size", cfg.vocab_size},
      {"decoder",
       {{"session_options", {{"log_id", "onnxruntime-genai"}, {"provider_options", json::array()}}},
        {"filename", kModelFile},
        {"head_size", cfg.head_dim},
        {"hidden_size", cfg.hidden_size},
        {"num_attention_heads", cfg.num_attention_heads},
        {"num_hidden_layers", cfg.num_hidden_layers},
        {"num_key_value_heads", cfg.num_key_value_heads},
        {"inputs",
         {{"input_ids", io::kInputIds},
          {"attention_mask", io::kAttentionMask},
          {"position_ids", io::kPositionIds},
          {"past_key_names", "past_key_values.%d.key"},
          {"past_value_names", "past_key_values.%d.value"}}},
        {"outputs",
         {{"logits", io::kLogits},
          {"present_key_names", "present.%d.key"},
          {"present_value_names", "present.%d.value"}}}}},
  };
  // As upstream: one eos id is written as a number, several as a list; pad
  // falls back to the (first) eos id; bos is left out when the model has none.
  const auto& eos = cfg.eos_token_ids;
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
    std::fprintf(stderr, "\rwriting weights: %3d%% (%.2f / %.2f GB)", percent, double(done) / 1e9,
                 double(total) / 1e9);
    if (done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

void copy_tokenizer_files(const Checkpoint& ckpt, const fs::path& dir) {
  for (const fs::path& src : ckpt.tokenizer_files()) {
    std::error_code ec;
    fs::copy_file(src, dir / src.filename(), fs::copy_options::overwrite_existing, ec);
    if (ec) fail(src.string(), "cannot copy into the model folder: " + ec.message());
  }
}

}  // namespace

void validate_build_options(const BuildOptions& opts) {
  if (opts.precision != "fp32") {
    const bool planned = opts.precision == "fp16" || opts.precision == "bf16" || opts.precision == "int4" ||
                         opts.precision == "int8";
    fail("--precision", (planned ? "'" + opts.precision + "' is not supported yet"
                                 : "unknown precision '" + opts.precision + "'") +
                            " (supported: fp32)");
  }
  if (opts.context_length < 0)
    fail("--context-length", "must be positive, got " + std::to_string(opts.context_length));
  if (opts.external_data_threshold < 0) fail("build", "external_data_threshold must not be negative");
}

BuildReport build_model(const Checkpoint& ckpt, const BuildOptions& opts, const fs::path& out_dir) {
  validate_build_options(opts);
  const ModelConfig& cfg = ckpt.config();
  BuildReport report;
  report.context_length = opts.context_length > 0 ? opts.context_length : cfg.max_position_embeddings;
  if (report.context_length <= 0)
    fail(ckpt.dir().string(), "config has no max_position_embeddings; pass --context-length");

  graph::GraphBuilder builder("main_graph");
  build_qwen35_graph(ckpt, opts, report.context_length, builder);
  report.node_count = builder.graph().node_size();
  onnx::ModelProto model = graph::make_model(builder, {{"", 21}, {graph::kMsDomain, 1}}, 10, "deltagen");

  AtomicDir dir(out_dir);
  graph::WriteOptions wopts;
  wopts.external_data_threshold = opts.external_data_threshold;
  wopts.progress = progress_printer(opts.show_progress);
  graph::WriteResult written =
      graph::write_model(std::move(model), builder.take_initializers(), dir.path() / kModelFile, wopts);
  report.weight_bytes = written.weight_bytes;
  report.external_data = written.external;

  write_file_atomic(dir.path() / "genai_config.json", genai_config(cfg, report.context_length).dump(4) + "\n");
  copy_tokenizer_files(ckpt, dir.path());
  dir.commit();
  return report;
}

}  // namespace deltagen
