// deltagen synth: write a random-weight checkpoint in the real HF layout.
#include <unistd.h>

#include <cstdio>

#include "synth/synth.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "deltagen/error.h"

namespace deltagen {

int cmd_synth(int argc, char** argv) {
  Args args(argc, argv, {"untied-lm-head", "tied-lm-head", "text-layout", "vision", "mtp"});
  const std::string preset = args.require("preset");
  ModelConfig cfg = synth_preset(preset);
  std::string out = args.require("out");
  SynthOptions opts;
  opts.seed = uint64_t(args.get_int("seed", 0));
  std::string dtype = args.get_or("dtype", "bf16");
  if (dtype == "f32") opts.dtype = DType::F32;
  else if (dtype == "bf16") opts.dtype = DType::BF16;
  else if (dtype == "f16") opts.dtype = DType::F16;
  else fail("--dtype", "unknown dtype '" + dtype + "' (expected f32, bf16 or f16)");
  if (args.has("layers")) set_num_layers(cfg, args.get_int("layers", 0));
  if (args.flag("untied-lm-head")) cfg.tie_word_embeddings = false;
  if (args.flag("tied-lm-head")) cfg.tie_word_embeddings = true;
  opts.vl_layout = !args.flag("text-layout");
  if (args.flag("vision")) {  // --vision: a vision tower of the preset's size (VL layout only)
    if (!opts.vl_layout) fail("--vision", "needs the VL layout (leave out --text-layout)");
    if (cfg.is_moe()) fail("--vision", "is for the dense presets");
    add_vision_tower(cfg, preset);
  }
  if (args.flag("mtp")) cfg.mtp_num_hidden_layers = 1;  // --mtp: a multi-token-prediction head, as released
  if (!opts.vl_layout) cfg.model_type = cfg.is_moe() ? "qwen3_5_moe_text" : "qwen3_5_text";
  // Mixture-of-experts shapes other than the presets' (round trips, studies).
  for (const char* key : {"experts", "top-k", "expert-layout"})
    if (args.has(key) && !cfg.is_moe()) fail(std::string("--") + key, "needs a mixture-of-experts preset");
  if (args.has("experts")) cfg.num_experts = args.get_int("experts", 0);
  if (args.has("top-k")) cfg.num_experts_per_tok = args.get_int("top-k", 0);
  if (cfg.is_moe() && (cfg.num_experts < 1 || cfg.num_experts_per_tok < 1 || cfg.num_experts_per_tok > cfg.num_experts))
    fail("--top-k", "must be between 1 and the number of experts (" + std::to_string(cfg.num_experts) + ")");
  const std::string layout = args.get_or("expert-layout", "fused");
  if (layout == "per-expert") opts.expert_layout = ExpertLayout::PerExpert;
  else if (layout != "fused") fail("--expert-layout", "unknown layout '" + layout + "' (expected fused or per-expert)");
  int64_t shard_mb = args.get_int("shard-size-mb", 4096);
  if (shard_mb <= 0) fail("--shard-size-mb", "must be positive");
  opts.shard_bytes = shard_mb << 20;
  if (args.has("tokenizer")) {
    opts.tokenizer_dir = args.require("tokenizer");
    fit_config_to_tokenizer(cfg, opts.tokenizer_dir);
  }
  args.finish();
  opts.progress = ::isatty(2);
  write_synthetic_checkpoint(cfg, opts, out);
  std::printf("wrote %s: preset %s, %lld layers, dtype %s, seed %llu%s\n", out.c_str(), preset.c_str(),
              (long long)cfg.num_hidden_layers, dtype.c_str(), (unsigned long long)opts.seed,
              opts.tokenizer_dir.empty() ? ""
                                         : (", tokenizer with " + std::to_string(cfg.vocab_size) + " ids").c_str());
  return 0;
}

}  // namespace deltagen
