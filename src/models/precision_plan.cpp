#include "models/precision_plan.h"

#include "deltagen/error.h"

namespace deltagen {
namespace {

graph::DataType float_dtype(FloatType type) {
  switch (type) {
    case FloatType::Fp32: return graph::kFloat;
    case FloatType::Fp16: return graph::kFloat16;
    case FloatType::Bf16: return graph::kBFloat16;
  }
  return graph::kFloat;
}

WeightFormat weight_format(Precision precision, const BuildOptions& opts) {
  WeightFormat w;
  switch (precision) {
    case Precision::Fp32: w.float_dtype = graph::kFloat; break;
    case Precision::Fp16: w.float_dtype = graph::kFloat16; break;
    case Precision::Bf16: w.float_dtype = graph::kBFloat16; break;
    case Precision::Int4:
    case Precision::Int8:
      w.quantized = true;
      w.block.bits = precision == Precision::Int4 ? 4 : 8;
      w.block.block_size = opts.block_size;
      w.block.symmetric = !opts.asymmetric;
      quant::check_block_format(w.block);
      break;
  }
  return w;
}

// --embedding's format, refused where it means nothing or contradicts another flag.
WeightFormat embedding_format(Precision precision, const BuildOptions& opts, bool quantized_build) {
  if (!quantized_build)
    fail("--embedding", "needs a quantized build (--precision int4 or int8): a float build stores its table in its precision");
  if (precision != Precision::Fp32 && precision != Precision::Fp16 && !is_quantized(precision))
    fail("--embedding", std::string("'") + precision_name(precision) + "' is not offered (fp32, fp16, int8 or int4)");
  if (opts.exclude_embeds) fail("--embedding", "the graph has no embedding table with --exclude-embeds");
  if (is_quantized(precision) && !opts.quantized_embedding_gather)
    fail("--embedding-gather", std::string("float contradicts --embedding ") + precision_name(precision) +
                                   " (a quantized table is read by GatherBlockQuantized); use --embedding fp16");
  return weight_format(precision, opts);
}

}  // namespace

bool same_format(const WeightFormat& a, const WeightFormat& b) {
  if (a.quantized != b.quantized) return false;
  if (!a.quantized) return a.float_dtype == b.float_dtype;
  return a.block.bits == b.block.bits && a.block.block_size == b.block.block_size &&
         a.block.symmetric == b.block.symmetric;
}

bool splits_tied_table(const PrecisionPlan& plan, const BuildOptions& opts) {
  return plan.embedding && !same_format(*plan.embedding, plan.lm_head) && !opts.exclude_embeds &&
         !opts.exclude_lm_head;
}

PrecisionPlan plan_precision(const BuildOptions& opts) {
  const Precision p = opts.precision;
  PrecisionPlan plan;
  plan.layers = weight_format(p, opts);
  if (is_quantized(p)) {
    plan.activations = opts.activations ? float_dtype(*opts.activations) : graph::kFloat;
  } else {
    plan.activations = plan.layers.float_dtype;
    if (opts.activations && float_dtype(*opts.activations) != plan.activations)
      fail("--activations", std::string("only quantized builds (int4, int8) take an activation dtype; a ") +
                                precision_name(p) + " build computes in " + precision_name(p));
  }
  plan.state = float_dtype(opts.state_dtype);

  plan.linear_attn = plan.layers;
  if (opts.linear_attn_bits != 0) {
    if (!is_quantized(p)) fail("--linear-attn-bits", "needs a quantized build (--precision int4 or int8)");
    if (opts.linear_attn_bits != 4 && opts.linear_attn_bits != 8)
      fail("--linear-attn-bits", "must be 4 or 8, got " + std::to_string(opts.linear_attn_bits));
    plan.linear_attn.block.bits = int(opts.linear_attn_bits);
  }

  plan.lm_head = opts.lm_head_precision ? weight_format(*opts.lm_head_precision, opts) : plan.layers;

  if (opts.accuracy_level < 0 || opts.accuracy_level > 4)
    fail("--accuracy-level", "must be 0..4, got " + std::to_string(opts.accuracy_level));
  plan.accuracy_level = opts.accuracy_level;
  const bool any_quantized = plan.layers.quantized || plan.lm_head.quantized;
  if (!any_quantized && (opts.asymmetric || opts.block_size != 32))
    fail(opts.asymmetric ? "--asymmetric" : "--block-size", "needs a quantized build (--precision int4 or int8)");
  if (!any_quantized && opts.accuracy_level != 4)
    fail("--accuracy-level", "needs a quantized build (--precision int4 or int8)");
  if (opts.embedding_precision) plan.embedding = embedding_format(*opts.embedding_precision, opts, any_quantized);
  return plan;
}

}  // namespace deltagen
