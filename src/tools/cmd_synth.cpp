// deltagen synth: write a random-weight checkpoint in the real HF layout.
#include <unistd.h>

#include <cstdio>

#include "synth/synth.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "deltagen/error.h"

namespace deltagen {

int cmd_synth(int argc, char** argv) {
  Args args(argc, argv, {"untied-lm-head", "text-layout"});
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
  opts.vl_layout = !args.flag("text-layout");
  if (!opts.vl_layout) cfg.model_type = "qwen3_5_text";
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
