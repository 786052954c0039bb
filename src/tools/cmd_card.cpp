// deltagen card MODEL_DIR --reference DIR --text FILE [--max-tokens N] [--context C]
//                [--threads T] [--json]
//   Teacher-forces the text through the model and the reference (a checkpoint:
//   the float64 C++ reference; or a built model folder, e.g. the fp32 build)
//   and writes MODEL_DIR/fidelity.json, the fidelity card (measure/fidelity_card.h):
//   KL mean/median/p99/p99.9/max, top-1 agreement, perplexities and their ratio.
//   Prints a short summary, or the card with --json.
//   --max-tokens  the first N tokens of the text (4096)
//   --context     tokens per teacher-forced window (512; at most the model's context)
//   --threads     ONNX Runtime intra-op threads (0 = its default)
#include <unistd.h>

#include <cstdio>

#include "measure/fidelity_card.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "deltagen/error.h"

namespace deltagen {

int cmd_card(int argc, char** argv) {
  Args args(argc, argv, {"json"});
  measure::CardOptions o;
  o.reference = args.require("reference");
  o.text_file = args.require("text");
  o.max_tokens = args.get_int("max-tokens", o.max_tokens);
  o.context = args.get_int("context", o.context);
  o.threads = int(args.get_int("threads", o.threads));
  const bool as_json = args.flag("json");
  args.has("");  // the model folder is positional
  args.finish();
  if (args.positional().size() != 1) fail("card", "expected one model folder (deltagen card MODEL_DIR --reference DIR --text FILE)");
  const std::string model_dir = args.positional()[0];
  o.progress = ::isatty(STDERR_FILENO) != 0;

  const nlohmann::ordered_json card = measure::write_fidelity_card(model_dir, o);
  if (as_json) {
    std::fputs((card.dump(2) + "\n").c_str(), stdout);
  } else {
    const std::string file = (std::filesystem::path(model_dir) / kFidelityCardFile).string();
    std::printf("wrote %s\n%s", file.c_str(), card_text(card).c_str());
  }
  return 0;
}

}  // namespace deltagen
