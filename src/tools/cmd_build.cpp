// deltagen build --checkpoint DIR --out DIR [--precision fp32] [--context-length N]
//                [--exact-l2norm-eps]
#include <cstdio>

#include "checkpoint/checkpoint.h"
#include "models/build.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "util/error.h"

namespace deltagen {

int cmd_build(int argc, char** argv) {
  Args args(argc, argv, {"exact-l2norm-eps"});
  const std::string checkpoint_dir = args.require("checkpoint");
  const std::string out_dir = args.require("out");
  BuildOptions opts;
  opts.precision = args.get_or("precision", opts.precision);
  opts.context_length = args.get_int("context-length", opts.context_length);
  opts.exact_l2norm_eps = args.flag("exact-l2norm-eps");
  args.finish();
  // Reject bad options before reading the checkpoint or creating any folder.
  validate_build_options(opts);

  auto ckpt = Checkpoint::open(checkpoint_dir);
  BuildReport r = build_model(*ckpt, opts, out_dir);
  std::printf("wrote %s: model.onnx (%lld nodes, %.1f MB of %s weights%s), genai_config.json, context %lld\n",
              out_dir.c_str(), (long long)r.node_count, double(r.weight_bytes) / 1e6, opts.precision.c_str(),
              r.external_data ? " in model.onnx.data" : "", (long long)r.context_length);
  return 0;
}

}  // namespace deltagen
