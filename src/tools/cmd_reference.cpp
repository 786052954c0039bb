// deltagen reference --checkpoint DIR --ids 5,17,300 [--max-new-tokens N]
//                    [--logits-out F.npy] [--json]
//
// Runs the float64 reference forward pass: prefills the prompt ids, then
// greedy-decodes N tokens one at a time (EOS is not special) and prints the
// continuation as space-separated ids, or with --json as
// {"prompt_ids":[...],"generated_ids":[...]}. --logits-out writes the f32
// logits [P + N - 1, vocab]: the P prompt rows, then one row per decode step
// (with N = 0 only the P prompt rows).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "reference/qwen35_reference.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "deltagen/error.h"
#include "util/npy.h"

namespace deltagen {

int cmd_reference(int argc, char** argv) {
  Args args(argc, argv, {"json"});
  const std::string checkpoint_dir = args.require("checkpoint");
  const std::string ids_text = args.require("ids");
  const int64_t new_tokens = args.get_int("max-new-tokens", 16);
  const auto logits_out = args.get("logits-out");
  const bool json = args.flag("json");
  args.finish();

  const std::vector<int64_t> prompt = parse_ids(ids_text, "--ids");
  if (prompt.empty()) fail("--ids", "empty prompt");
  if (new_tokens < 0) fail("--max-new-tokens", "must be >= 0, got " + std::to_string(new_tokens));
  // Fail before the (possibly long) forward pass rather than after it.
  if (logits_out) {
    const std::filesystem::path parent = std::filesystem::path(*logits_out).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent))
      fail(*logits_out, "folder " + parent.string() + " does not exist");
  }

  auto ckpt = Checkpoint::open(checkpoint_dir);
  const ModelConfig& cfg = ckpt->config();
  for (int64_t id : prompt)
    if (id >= cfg.vocab_size)
      fail("--ids", "token id " + std::to_string(id) + " is not below vocab_size " + std::to_string(cfg.vocab_size));
  // Every prompt and generated token takes a position (the last generated
  // one is never fed back, but a runtime would cache it next).
  const int64_t total = int64_t(prompt.size()) + new_tokens;
  if (cfg.max_position_embeddings > 0 && total > cfg.max_position_embeddings)
    fail(int64_t(prompt.size()) > cfg.max_position_embeddings ? "--ids" : "--max-new-tokens",
         "prompt longer than the context: " + std::to_string(prompt.size()) + " prompt + " +
             std::to_string(new_tokens) + " new tokens exceed max_position_embeddings " +
             std::to_string(cfg.max_position_embeddings));

  ReferenceModel model(*ckpt);
  GreedyResult r = reference_greedy(model, prompt, new_tokens);

  // Write the file before printing, so that a failed write leaves no
  // half-reported run (write_npy_f32 itself is atomic).
  if (logits_out) {
    std::vector<float> f32(r.logits.data.begin(), r.logits.data.end());
    write_npy_f32(*logits_out, f32.data(), {r.logits.rows, r.logits.cols});
  }

  if (json) {
    nlohmann::json j = {{"prompt_ids", prompt}, {"generated_ids", r.generated}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < r.generated.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(r.generated[i]);
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace deltagen
