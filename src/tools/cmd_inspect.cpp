// deltagen inspect DIR_or_model.onnx [--json]
//                                         with the fidelity card at the end when the
//                                         folder has one (fidelity.json: `deltagen card`)
// deltagen inspect A --diff B [--json]    per-op-type node counts of A and B and
//                                         their difference, totals, weight bytes
// deltagen inspect DIR --ep cpu|webgpu|cuda [--threads T] [--json]
//                                         loads the model on the EP and profiles
//                                         a short prompt and 3 decode steps: node
//                                         runs per provider, dispatches per decode
//                                         step, the nodes on the CPU on purpose and
//                                         the fallbacks (measure/ep_placement.h)
#include <cstdio>

#include <nlohmann/json.hpp>

#include "graph/model_diff.h"
#include "graph/model_summary.h"
#include "measure/ep_placement.h"
#include "runtime/fidelity_card_file.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "deltagen/error.h"

namespace deltagen {

int cmd_inspect(int argc, char** argv) {
  Args args(argc, argv, {"json"});
  const bool as_json = args.flag("json");
  const auto other = args.get("diff");
  const bool on_ep = args.get("ep").has_value();
  const ExecutionProvider ep = get_ep_flag(args, "ep").value_or(ExecutionProvider::Cpu);
  const int threads = int(args.get_int("threads", 0));
  args.has("");  // positional arguments are expected
  args.finish();
  if (args.positional().size() != 1) fail("inspect", "expected one model folder or .onnx file");

  if (on_ep) {
    if (other) fail("inspect", "--ep and --diff do not go together");
    const measure::EpPlacement p =
        measure::measure_ep_placement(args.positional()[0], ep, {.threads = threads});
    const std::string text = as_json ? measure::placement_json(p).dump(2) + "\n" : measure::placement_text(p);
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  graph::ModelSummary s = graph::summarize_model(args.positional()[0]);
  std::string text;
  if (other) {
    graph::ModelDiff d = graph::diff_models(s, graph::summarize_model(*other));
    text = as_json ? graph::diff_json(d).dump(2) + "\n" : graph::diff_text(d);
  } else {
    // The card lives beside the model; graph/ knows nothing of measurements.
    const auto card = read_fidelity_card(s.file);
    if (as_json) {
      nlohmann::json j = graph::summary_json(s);
      if (card) j["fidelity"] = nlohmann::json(*card);  // keys sorted like the rest of the summary
      text = j.dump(2) + "\n";
    } else {
      text = graph::summary_text(s);
      if (card) text += card_summary_line(*card) + "\n";
    }
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace deltagen
