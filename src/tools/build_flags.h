// `deltagen build` flags given as one string ("--precision fp16 --norm-upcast")
// turned into BuildOptions, for commands that build models themselves
// (compare --depth hands them to measure's depth study). The flags are parsed
// by the build command's own parser (build_args.h), so every build flag
// works here too.
#pragma once
#include <string>
#include <vector>

#include "models/build.h"

namespace deltagen {

// Splits on whitespace (no quoting: no build flag value contains spaces).
std::vector<std::string> split_flags(const std::string& flags);
std::string join_words(const std::vector<std::string>& words);  // with one space between

// Throws Error for an unknown flag, a missing value, or options the builder
// rejects. --checkpoint and --out are not accepted. Returns the options
// normalized (normalized_build_options), i.e. as build_model sees them.
BuildOptions parse_build_flags(const std::string& flags);

}  // namespace deltagen
