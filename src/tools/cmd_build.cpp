// deltagen build --checkpoint DIR --out DIR [options]
//
//   precision   --precision fp32|fp16|bf16|int4|int8   --activations fp32|fp16|bf16 (quantized builds)
//               --state-dtype fp32|fp16|bf16   --keep-lm-head fp32|fp16|bf16|int8|int4
//   quantized   --block-size 16..256 (32)   --asymmetric   --accuracy-level 0..4 (4)
//               --linear-attn-bits 8   --embedding-gather quantized|float
//   graph I/O   --exclude-embeds   --exclude-lm-head   --prune-lm-head
//               --layer-outputs (hidden_states.0..N: the residual stream between layers)
//   old forms   --norm-upcast   --l2norm lpnorm|lpnorm-eps|decomposed   --q-scale-mul
//               --no-rotary-in-attention   --no-fuse-projections   --no-linear-attention-gate
//               --no-gated-rmsnorm
//   opt-in      --conv-channels-last (conv_state becomes [B, K-1, C])
//   other       --context-length N   --threads N   (--exact-l2norm-eps = --l2norm lpnorm-eps, deprecated)
// Each flag sets one BuildOptions field (models/build_options.h).
#include <chrono>
#include <cstdio>

#include "checkpoint/checkpoint.h"
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
      "no-fuse-projections", "no-linear-attention-gate", "no-gated-rmsnorm", "exact-l2norm-eps",
      "layer-outputs",
  };
  return switches;
}

BuildOptions build_options_from_args(Args& args) {
  BuildOptions o;
  o.precision = args.get_or("precision", o.precision);
  o.activations = args.get_or("activations", o.activations);
  o.state_dtype = args.get_or("state-dtype", o.state_dtype);
  o.block_size = args.get_int("block-size", o.block_size);
  o.asymmetric = args.flag("asymmetric");
  o.accuracy_level = args.get_int("accuracy-level", o.accuracy_level);
  o.lm_head_precision = args.get_or("keep-lm-head", o.lm_head_precision);
  o.linear_attn_bits = args.get_int("linear-attn-bits", o.linear_attn_bits);
  const std::string gather = args.get_or("embedding-gather", "quantized");
  if (gather != "quantized" && gather != "float")
    fail("--embedding-gather", "expected quantized or float, got '" + gather + "'");
  o.quantized_embedding_gather = gather == "quantized";

  o.exclude_embeds = args.flag("exclude-embeds");
  o.exclude_lm_head = args.flag("exclude-lm-head");
  o.prune_lm_head = args.flag("prune-lm-head");
  o.layer_outputs = args.flag("layer-outputs");

  o.norm_upcast = args.flag("norm-upcast");
  o.l2norm = args.get_or("l2norm", o.l2norm);
  o.exact_l2norm_eps = args.flag("exact-l2norm-eps");  // deprecated: --l2norm lpnorm-eps
  o.q_scale_mul = args.flag("q-scale-mul");
  o.conv_channels_last = args.flag("conv-channels-last");
  o.rotary_in_attention = !args.flag("no-rotary-in-attention");
  o.fuse_projections = !args.flag("no-fuse-projections");
  o.linear_attention_gate = !args.flag("no-linear-attention-gate");
  o.gated_rmsnorm = !args.flag("no-gated-rmsnorm");

  o.context_length = args.get_int("context-length", o.context_length);
  o.threads = int(args.get_int("threads", o.threads));
  return o;
}

int cmd_build(int argc, char** argv) {
  Args args(argc, argv, build_switches());
  const std::string checkpoint_dir = args.require("checkpoint");
  const std::string out_dir = args.require("out");
  BuildOptions opts = build_options_from_args(args);
  args.finish();
  // Reject bad options before reading the checkpoint or creating any folder.
  opts = normalized_build_options(opts);

  const auto start = std::chrono::steady_clock::now();
  auto ckpt = Checkpoint::open(checkpoint_dir);
  BuildReport r = build_model(*ckpt, opts, out_dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: model.onnx (%lld nodes, %.1f MB of %s weights%s), genai_config.json, context %lld, %.1f s\n",
              out_dir.c_str(), (long long)r.node_count, double(r.weight_bytes) / 1e6, opts.precision.c_str(),
              r.external_data ? " in model.onnx.data" : "", (long long)r.context_length, seconds);
  return 0;
}

}  // namespace deltagen
