#include "models/precision_plan.h"

#include "deltagen/error.h"

namespace deltagen {
namespace {

bool is_quantized(const std::string& p) { return p == "int4" || p == "int8"; }

WeightFormat weight_format(const std::string& precision, const BuildOptions& opts, const std::string& flag) {
  WeightFormat w;
  if (is_quantized(precision)) {
    w.quantized = true;
    w.block.bits = precision == "int4" ? 4 : 8;
    w.block.block_size = opts.block_size;
    w.block.symmetric = !opts.asymmetric;
    quant::check_block_format(w.block);
  } else {
    w.float_dtype = parse_float_dtype(precision, flag);
  }
  return w;
}

}  // namespace

graph::DataType parse_float_dtype(const std::string& text, const std::string& flag) {
  if (text == "fp32") return graph::kFloat;
  if (text == "fp16") return graph::kFloat16;
  if (text == "bf16") return graph::kBFloat16;
  fail(flag, "unknown precision '" + text + "' (expected fp32, fp16 or bf16)");
}

std::string float_dtype_label(graph::DataType dtype) {
  switch (dtype) {
    case graph::kFloat: return "fp32";
    case graph::kFloat16: return "fp16";
    case graph::kBFloat16: return "bf16";
    default: return graph::dtype_name(dtype);
  }
}

PrecisionPlan plan_precision(const BuildOptions& opts) {
  const std::string& p = opts.precision;
  if (p != "fp32" && p != "fp16" && p != "bf16" && !is_quantized(p))
    fail("--precision", "unknown precision '" + p + "' (supported: fp32, fp16, bf16, int4, int8)");

  PrecisionPlan plan;
  plan.layers = weight_format(p, opts, "--precision");
  if (is_quantized(p)) {
    plan.activations = opts.activations.empty() ? graph::kFloat : parse_float_dtype(opts.activations, "--activations");
  } else {
    plan.activations = plan.layers.float_dtype;
    if (!opts.activations.empty() && parse_float_dtype(opts.activations, "--activations") != plan.activations)
      fail("--activations", "only quantized builds (int4, int8) take an activation dtype; a " + p +
                                " build computes in " + p);
  }
  plan.state = parse_float_dtype(opts.state_dtype, "--state-dtype");

  plan.linear_attn = plan.layers;
  if (opts.linear_attn_bits != 0) {
    if (!is_quantized(p)) fail("--linear-attn-bits", "needs a quantized build (--precision int4 or int8)");
    if (opts.linear_attn_bits != 4 && opts.linear_attn_bits != 8)
      fail("--linear-attn-bits", "must be 4 or 8, got " + std::to_string(opts.linear_attn_bits));
    plan.linear_attn.block.bits = int(opts.linear_attn_bits);
  }

  plan.lm_head = plan.layers;
  if (!opts.lm_head_precision.empty()) {
    const std::string& h = opts.lm_head_precision;
    if (h != "fp32" && h != "fp16" && h != "bf16" && !is_quantized(h))
      fail("--keep-lm-head", "unknown precision '" + h + "' (supported: fp32, fp16, bf16, int8, int4)");
    plan.lm_head = weight_format(h, opts, "--keep-lm-head");
  }

  if (opts.accuracy_level < 0 || opts.accuracy_level > 4)
    fail("--accuracy-level", "must be 0..4, got " + std::to_string(opts.accuracy_level));
  plan.accuracy_level = opts.accuracy_level;
  const bool any_quantized = plan.layers.quantized || plan.lm_head.quantized;
  if (!any_quantized && (opts.asymmetric || opts.block_size != 32))
    fail(opts.asymmetric ? "--asymmetric" : "--block-size", "needs a quantized build (--precision int4 or int8)");
  if (!any_quantized && opts.accuracy_level != 4)
    fail("--accuracy-level", "needs a quantized build (--precision int4 or int8)");
  return plan;
}

}  // namespace deltagen
