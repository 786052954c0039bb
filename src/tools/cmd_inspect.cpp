// deltagen inspect DIR_or_model.onnx [--json]
#include <cstdio>

#include <nlohmann/json.hpp>

#include "graph/model_summary.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "util/error.h"

namespace deltagen {

int cmd_inspect(int argc, char** argv) {
  Args args(argc, argv, {"json"});
  bool as_json = args.flag("json");
  args.has("");  // positional arguments are expected
  args.finish();
  if (args.positional().size() != 1) fail("inspect", "expected one model folder or .onnx file");

  graph::ModelSummary s = graph::summarize_model(args.positional()[0]);
  std::string text = as_json ? graph::summary_json(s).dump(2) + "\n" : graph::summary_text(s);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace deltagen
