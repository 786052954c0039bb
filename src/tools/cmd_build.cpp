// deltagen build --checkpoint DIR --out DIR [options]
//
//   precision   --precision fp32|fp16|bf16|int4|int8   --activations fp32|fp16|bf16 (quantized builds)
//               --state-dtype fp32|fp16|bf16   --keep-lm-head fp32|fp16|bf16|int8|int4
//   quantized   --block-size 16..256 (32)   --asymmetric   --accuracy-level 0..4 (4)
//               --linear-attn-bits 8   --embedding-gather quantized|float
//               --embedding fp32|fp16|int8|int4 (the table apart from the lm_head; unties a tied one)
//   fitting     --quant-method rtn|search|gptq   --calibration TEXT_FILE   --calibration-tokens N (1024)
//               --bits-budget B (mixed int4/int8 by measured sensitivity; needs --calibration)
//               --budget-of read|file (B per weight read per decoded token (default), or per weight stored)
//               --memory-limit GB (what calibration may use; default: the machine's available memory)
//   graph I/O   --exclude-embeds   --exclude-lm-head   --prune-lm-head
//               --layer-outputs (hidden_states.0..N: the residual stream between layers)
//               --no-mtp (leave a checkpoint's multi-token-prediction head out: no mtp.onnx)
//               --mtp-draft-vocab N (the head guesses among the first N token ids only; 0: all)
//   images      --vision (VL checkpoints: vision.onnx + embedding.onnx, and a decoder taking
//               inputs_embeds and 3-D position_ids: onnxruntime-genai's VL layout)
//               --vision-precision fp32|int8|int4 (the tower's Linear weights; fp32)
//   old forms   --norm-upcast   --l2norm lpnorm|lpnorm-eps|decomposed   --q-scale-mul
//               --no-rotary-in-attention   --no-fuse-projections   --no-linear-attention-gate
//               --no-gated-rmsnorm
//   opt-in      --conv-channels-last (conv_state becomes [B, K-1, C])
//   target      --target cpu|webgpu|cuda (genai_config.json's provider; webgpu/cuda default to
//               int4 weights + fp16 activations when --precision is not given)
//   other       --context-length N   --threads N
//   card        --card TEXT_FILE [--card-reference DIR] [--card-tokens N]: after the build,
//               write the model's fidelity card (fidelity.json, measure/fidelity_card.h)
//               on that text, against the checkpoint's float64 reference (or DIR: a
//               checkpoint or a built model). The text is checked before anything is built.
// Each flag but the card's sets one BuildOptions field (models/build_options.h); the
// card is a measurement of the result, not a graph switch.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "measure/fidelity_card.h"
#include "models/build.h"
#include "tools/args.h"
#include "tools/build_args.h"
#include "tools/commands.h"
#include "deltagen/error.h"

namespace deltagen {

const std::set<std::string>& build_switches() {
  static const std::set<std::string> switches = {
      "asymmetric",          "exclude-embeds",           "exclude-lm-head",  "prune-lm-head",
      "norm-upcast",         "q-scale-mul",              "conv-channels-last", "no-rotary-in-attention",
      "no-fuse-projections", "no-linear-attention-gate", "no-gated-rmsnorm", "layer-outputs",    "vision", "no-mtp",
  };
  return switches;
}

namespace {

Precision parse_precision(const std::string& text, const std::string& flag) {
  for (Precision p : {Precision::Fp32, Precision::Fp16, Precision::Bf16, Precision::Int4, Precision::Int8})
    if (text == precision_name(p)) return p;
  fail("--" + flag, "unknown precision '" + text + "' (supported: fp32, fp16, bf16, int4, int8)");
}

FloatType parse_float_type(const std::string& text, const std::string& flag) {
  for (FloatType t : {FloatType::Fp32, FloatType::Fp16, FloatType::Bf16})
    if (text == float_type_name(t)) return t;
  fail("--" + flag, "unknown precision '" + text + "' (expected fp32, fp16 or bf16)");
}

L2Norm parse_l2norm(const std::string& text) {
  for (L2Norm f : {L2Norm::LpNorm, L2Norm::LpNormEps, L2Norm::Decomposed})
    if (text == l2norm_name(f)) return f;
  fail("--l2norm", "unknown form '" + text + "' (expected lpnorm, lpnorm-eps or decomposed)");
}

// The table formats --embedding offers (bf16 would store fp16's bytes with fewer mantissa bits).
Precision parse_embedding_format(const std::string& text) {
  for (Precision p : {Precision::Fp32, Precision::Fp16, Precision::Int8, Precision::Int4})
    if (text == precision_name(p)) return p;
  fail("--embedding", "unknown format '" + text + "' (expected fp32, fp16, int8 or int4)");
}

}  // namespace

BuildOptions build_options_from_args(Args& args) {
  BuildOptions o;
  if (auto v = args.get("precision")) o.precision = parse_precision(*v, "precision");
  if (auto v = args.get("activations")) o.activations = parse_float_type(*v, "activations");
  if (auto v = args.get("state-dtype")) o.state_dtype = parse_float_type(*v, "state-dtype");
  o.block_size = args.get_int("block-size", o.block_size);
  o.asymmetric = args.flag("asymmetric");
  o.accuracy_level = args.get_int("accuracy-level", o.accuracy_level);
  if (auto v = args.get("keep-lm-head")) o.lm_head_precision = parse_precision(*v, "keep-lm-head");
  o.linear_attn_bits = args.get_int("linear-attn-bits", o.linear_attn_bits);
  const std::string gather = args.get_or("embedding-gather", "quantized");
  if (gather != "quantized" && gather != "float")
    fail("--embedding-gather", "expected quantized or float, got '" + gather + "'");
  o.quantized_embedding_gather = gather == "quantized";
  if (auto v = args.get("embedding")) o.embedding_precision = parse_embedding_format(*v);
  if (auto v = args.get("quant-method")) {
    const auto method = quant::parse_quant_method(*v);
    if (!method) fail("--quant-method", "unknown method '" + *v + "' (expected rtn, search or gptq)");
    o.quant_method = *method;
  }
  if (auto v = args.get("calibration")) o.calibration = *v;
  o.calibration_tokens = args.get_int("calibration-tokens", o.calibration_tokens);
  if (auto v = args.get("memory-limit")) {
    double gb = 0;
    try {
      size_t used = 0;
      gb = std::stod(*v, &used);
      if (used != v->size()) throw std::invalid_argument(*v);
    } catch (const std::exception&) {
      fail("--memory-limit", "expected a number of gigabytes, got '" + *v + "'");
    }
    if (!(gb > 0 && gb < 1e6)) fail("--memory-limit", "must be a positive number of gigabytes, got '" + *v + "'");
    o.memory_limit = int64_t(gb * 1e9);
  }
  if (auto v = args.get("budget-of")) {
    if (*v != "read" && *v != "file") fail("--budget-of", "expected read or file, got '" + *v + "'");
    o.budget_of = *v == "read" ? BuildOptions::BudgetOf::Read : BuildOptions::BudgetOf::File;
  }
  if (auto v = args.get("bits-budget")) {
    try {
      size_t used = 0;
      o.bits_budget = std::stod(*v, &used);
      if (used != v->size()) throw std::invalid_argument(*v);
    } catch (const std::exception&) {
      fail("--bits-budget", "expected a number of bits per weight, got '" + *v + "'");
    }
  } else if (args.has("budget-of")) {
    fail("--budget-of", "says what --bits-budget counts: give --bits-budget B too");
  }

  o.exclude_embeds = args.flag("exclude-embeds");
  o.exclude_lm_head = args.flag("exclude-lm-head");
  o.prune_lm_head = args.flag("prune-lm-head");
  o.layer_outputs = args.flag("layer-outputs");
  o.mtp = !args.flag("no-mtp");
  o.mtp_draft_vocab = args.get_int("mtp-draft-vocab", o.mtp_draft_vocab);
  if (o.mtp_draft_vocab < 0) fail("--mtp-draft-vocab", "expected a token count >= 0, got " + std::to_string(o.mtp_draft_vocab));
  o.vision = args.flag("vision");
  if (auto v = args.get("vision-precision")) o.vision_precision = parse_precision(*v, "vision-precision");

  o.norm_upcast = args.flag("norm-upcast");
  if (auto v = args.get("l2norm")) o.l2norm = parse_l2norm(*v);
  o.q_scale_mul = args.flag("q-scale-mul");
  o.conv_channels_last = args.flag("conv-channels-last");
  o.rotary_in_attention = !args.flag("no-rotary-in-attention");
  o.fuse_projections = !args.flag("no-fuse-projections");
  o.linear_attention_gate = !args.flag("no-linear-attention-gate");
  o.gated_rmsnorm = !args.flag("no-gated-rmsnorm");

  if (auto v = args.get("target")) {
    try {
      o.target = parse_execution_provider(*v);
    } catch (const Error&) {
      fail("--target", "expected cpu, webgpu or cuda, not '" + *v + "'");
    }
  }
  // A GPU's usual build: int4 weights, fp16 activations (q4f16).
  if (o.target != ExecutionProvider::Cpu && !args.get("precision")) {
    o.precision = Precision::Int4;
    if (!o.activations) o.activations = FloatType::Fp16;
  }

  o.context_length = args.get_int("context-length", o.context_length);
  o.threads = int(args.get_int("threads", o.threads));
  return o;
}

int cmd_build(int argc, char** argv) {
  Args args(argc, argv, build_switches());
  const std::string checkpoint_dir = args.require("checkpoint");
  const std::string out_dir = args.require("out");
  BuildOptions opts = build_options_from_args(args);
  std::optional<measure::CardOptions> card;
  if (auto text = args.get("card")) {
    card.emplace();
    card->text_file = *text;
    card->reference = args.get_or("card-reference", checkpoint_dir);
    card->max_tokens = args.get_int("card-tokens", card->max_tokens);
    card->threads = opts.threads;
    card->progress = ::isatty(STDERR_FILENO) != 0;
  } else {
    for (const char* f : {"card-reference", "card-tokens"})
      if (args.has(f)) fail(std::string("--") + f, "needs --card TEXT_FILE");
  }
  args.finish();
  // Reject bad options before reading the checkpoint or creating any folder.
  opts = normalized_build_options(opts);
  // ... and a bad card text: the checkpoint's tokenizer.json is the one the
  // build copies into the model folder.
  if (card) measure::check_card_inputs(*card, measure::card_tokenizer_dir(checkpoint_dir, card->reference));

  const auto start = std::chrono::steady_clock::now();
  auto ckpt = Checkpoint::open(checkpoint_dir);
  BuildReport r = build_model(*ckpt, opts, out_dir);
  ckpt.reset();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: model.onnx (%lld nodes, %.1f MB of %s weights%s), genai_config.json, context %lld, %.1f s\n",
              out_dir.c_str(), (long long)r.node_count, double(r.weight_bytes) / 1e6, precision_name(opts.precision),
              r.external_data ? " in model.onnx.data" : "", (long long)r.context_length, seconds);
  if (card) {
    std::fflush(stdout);
    const nlohmann::ordered_json c = measure::write_fidelity_card(out_dir, *card);
    std::printf("wrote %s/%s: %s\n", out_dir.c_str(), kFidelityCardFile, card_summary_line(c).c_str());
  }
  return 0;
}

}  // namespace deltagen
