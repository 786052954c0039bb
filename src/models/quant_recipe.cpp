#include "models/quant_recipe.h"

#include <chrono>

#include "deltagen/error.h"
#include "models/mixed_precision.h"
#include "models/streamed_calibration.h"
#include "tokenizer/text_file.h"
#include "util/memory_info.h"

namespace deltagen {
namespace {

quant::ScaleStorage scale_storage(graph::DataType dtype) {
  if (dtype == graph::kFloat16) return quant::ScaleStorage::F16;
  if (dtype == graph::kBFloat16) return quant::ScaleStorage::BF16;
  return quant::ScaleStorage::F32;
}

// The smallest calibration that says anything; the study needs a window.
constexpr int64_t kMinCalibrationTokens = 64;
constexpr double kTiedTableDamp = 1.0;

// How the mixed plan counts the embedding table (the graph's rules in
// qwen35.cpp, Graph::embed_tokens): shared with a tied head, in --embedding's
// format, a float table (--embedding-gather float, or rows that are not whole
// blocks), else in the head's format.
void embedding_for_budget(const Checkpoint& ckpt, const BuildOptions& o, const PrecisionPlan& plan, bool split,
                          MixedPlanOptions& mo) {
  const ModelConfig& c = ckpt.config();
  if (o.exclude_embeds) return;
  mo.embedding_rows = c.vocab_size;
  mo.embedding_cols = c.hidden_size;
  mo.budget_per_read = o.budget_of == BuildOptions::BudgetOf::Read;
  const bool gathers_quantized = o.quantized_embedding_gather && c.hidden_size % plan.lm_head.block.block_size == 0;
  const bool tied = ckpt.lm_head_name() == "embed_tokens.weight";
  if (plan.embedding && (split || !tied)) {
    mo.embedding_format = plan.embedding;
  } else if (!gathers_quantized) {
    WeightFormat table;
    table.float_dtype = plan.activations;
    mo.embedding_format = table;
  }
  mo.embedding_shared = tied && !split && !mo.embedding_format && !o.exclude_lm_head;
}

}  // namespace

WeightFormat QuantRecipe::format_for(const std::vector<std::string>& tensors, const WeightFormat& planned) const {
  if (!planned.quantized || tensors.empty()) return planned;
  auto it = formats.find(tensors.front());
  return it == formats.end() ? planned : it->second;
}

quant::FitOptions QuantRecipe::fit_for(const std::vector<std::string>& tensors, graph::DataType scale_dtype) const {
  quant::FitOptions fit{.method = method, .scales = scale_storage(scale_dtype)};
  const CalibrationSite* site = calibration && !tensors.empty() ? calibration->site_of(tensors.front()) : nullptr;
  bool full = false;  // the whole Gram matrix is at hand (gptq)
  if (site && !site->spilled) {
    fit.stats = site->stats.get();
    full = fit.stats->full();
  } else if (site) {
    // Read from disk when the weight is quantized (as it is written): one
    // Gram matrix in memory at a time.
    fit.load_stats = [spilled = site->spilled, summary = site->stats] {
      return std::shared_ptr<const quant::InputStats>(spilled->read(*summary));
    };
    full = true;
  }
  // A tied table is also the embedding, whose rounding errors gptq's H (the
  // lm_head's inputs) does not see: a larger damping pulls its fit toward the
  // plain squared error (measured on qwen35-tiny-en: docs/quantization.md).
  if (!tensors.empty() && tensors.front() == "embed_tokens.weight" && !tied_table_split) fit.damp = kTiedTableDamp;
  // A weight no calibration input reaches (an untied embedding table, read by
  // a gather) is fitted by the scale search with equal weights.
  if (method == quant::QuantMethod::Gptq && !full) {
    fit.method = quant::QuantMethod::Search;
    fit.stats = nullptr;
  }
  return fit;
}

quant::FitOptions QuantRecipe::fit_for_gathered_table(graph::DataType scale_dtype) const {
  quant::FitOptions fit{.method = method, .scales = scale_storage(scale_dtype)};
  // Nothing weights its input channels: gptq has no H to spread errors by.
  if (method == quant::QuantMethod::Gptq) fit.method = quant::QuantMethod::Search;
  return fit;
}

void validate_quantization_options(const BuildOptions& o) {
  quant::check_quant_method(o.quant_method);
  const bool quantized = is_quantized(o.precision) || (o.lm_head_precision && is_quantized(*o.lm_head_precision));
  if (o.quant_method != quant::QuantMethod::Rtn && !quantized)
    fail("--quant-method", "needs a quantized build (--precision int4 or int8)");
  if (!o.calibration.empty() && !quantized) fail("--calibration", "needs a quantized build (--precision int4 or int8)");
  if (quant::needs_calibration(o.quant_method) && o.calibration.empty())
    fail("--quant-method", std::string(quant::quant_method_name(o.quant_method)) +
                               " needs a calibration text: --calibration TEXT_FILE");
  if (o.calibration_tokens < kMinCalibrationTokens || o.calibration_tokens > (int64_t(1) << 20))
    fail("--calibration-tokens", "must be in [" + std::to_string(kMinCalibrationTokens) + ", 1048576], got " +
                                     std::to_string(o.calibration_tokens));
  if (o.bits_budget != 0) {
    if (o.precision != Precision::Int4) fail("--bits-budget", "needs --precision int4");
    if (o.calibration.empty()) fail("--bits-budget", "needs a calibration text: --calibration TEXT_FILE");
    if (o.lm_head_precision || o.linear_attn_bits != 0)
      fail("--bits-budget", "chooses every format itself: leave out --keep-lm-head and --linear-attn-bits");
    if (!(o.bits_budget >= 2.0 && o.bits_budget <= 16.0))
      fail("--bits-budget", "must be a number of bits per weight in [2, 16], got " + std::to_string(o.bits_budget));
  }
  // The text's own checks (exists, not empty, UTF-8) before any slow work.
  if (!o.calibration.empty()) validate_text_file(o.calibration);
}

QuantRecipe prepare_quantization(const Checkpoint& ckpt, const BuildOptions& o, const PrecisionPlan& plan) {
  QuantRecipe r;
  r.method = o.quant_method;
  r.tied_table_split = ckpt.lm_head_name() == "embed_tokens.weight" && splits_tied_table(plan, o);
  if (!plan.layers.quantized && !plan.lm_head.quantized) return r;
  r.report = {{"method", quant::quant_method_name(o.quant_method)}};
  // The routed experts are quantized with rtn (models/expert_weights.h); the
  // mixed plan measures Linear sites only, which would leave them out of its budget.
  if (o.bits_budget != 0 && ckpt.config().is_moe())
    fail("--bits-budget", "is not supported for mixture-of-experts checkpoints yet (the routed experts are not planned)");
  if (ckpt.config().is_moe()) r.report["routed_experts"] = "rtn";
  if (o.calibration.empty()) return r;

  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> ids = calibration_ids(o.calibration, ckpt.dir(), kMinCalibrationTokens);
  if (int64_t(ids.size()) < o.calibration_tokens)
    fail(o.calibration.string(), "has " + std::to_string(ids.size()) + " tokens, --calibration-tokens asks for " +
                                     std::to_string(o.calibration_tokens) + " (a longer text, or fewer tokens)");
  CalibrationOptions co;
  co.max_tokens = o.calibration_tokens;
  co.full_gram = o.quant_method == quant::QuantMethod::Gptq;
  co.progress = o.show_progress;
  // The mixed plan reruns the whole model: it needs the resident float64
  // reference. Otherwise the checkpoint streams through one layer at a time.
  const bool streamed = o.bits_budget == 0;
  const ModelConfig& cfg = ckpt.config();
  const int64_t need = streamed ? streamed_calibration_bytes(cfg, o.calibration_tokens, co)
                                : resident_calibration_bytes(cfg, o.calibration_tokens, co);
  const int64_t limit = o.memory_limit > 0 ? o.memory_limit : available_memory_bytes();
  if (need > limit)
    fail(o.bits_budget != 0 ? "--bits-budget" : "--calibration",
         std::string(streamed ? "calibrating" : "the mixed plan's study of") + " this model needs about " +
             memory_text(need) + " of memory, " + memory_text(limit) +
             (o.memory_limit > 0 ? " allowed by --memory-limit" : " available") +
             (streamed ? ": use fewer --calibration-tokens" : ": leave out --bits-budget (calibration alone streams)"));
  std::optional<ReferenceModel> model;
  if (streamed) {
    r.calibration = calibrate_streamed(ckpt, ids, co);
  } else {
    model.emplace(ckpt);
    r.calibration = calibrate(*model, ids, co);
  }
  const double calibrated = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.report["calibration"] = {{"file", o.calibration.filename().string()},
                             {"tokens", r.calibration->tokens},
                             {"streamed", streamed},
                             {"predicted_bytes", need},
                             {"seconds", calibrated}};

  if (o.bits_budget != 0) {
    MixedPlanOptions mo;
    mo.bits_budget = o.bits_budget;
    mo.base = plan.layers.block;
    mo.method = o.quant_method;
    const graph::DataType scale_dtype = plan.activations;  // MatMulNBits' scales are in the activation dtype
    mo.scales = scale_storage(scale_dtype);
    mo.scale_bytes = scale_dtype == graph::kFloat ? 4 : 2;
    mo.threads = o.threads;
    mo.progress = o.show_progress;
    embedding_for_budget(ckpt, o, plan, r.tied_table_split, mo);
    const MixedPlan mixed = plan_mixed_precision(*model, *r.calibration, ids, mo);
    for (const SitePlan& sp : mixed.sites)
      for (const std::string& w : sp.weights) r.formats[w] = sp.candidates[sp.chosen].format;
    r.report["bits_budget"] = o.bits_budget;
    r.report["mixed"] = to_json(mixed);
    r.report["mixed"]["seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - calibrated;
  }
  return r;
}

}  // namespace deltagen
