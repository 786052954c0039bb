// The option flags of `deltagen build` (everything but --checkpoint and
// --out), for any tool that builds models from the same flags: the parser
// lives in tools/cmd_build.cpp, so a new build flag reaches every tool at once.
#pragma once
#include <set>
#include <string>

#include "models/build_options.h"
#include "tools/args.h"

namespace deltagen {

// The build flags that take no value; pass them to Args' constructor.
const std::set<std::string>& build_switches();

// Reads every build flag from `args` (marking them known). Does not call
// args.finish() and does not validate: see validate_build_options().
BuildOptions build_options_from_args(Args& args);

}  // namespace deltagen
