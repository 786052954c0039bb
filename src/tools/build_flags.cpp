#include "tools/build_flags.h"

#include <sstream>

#include "tools/args.h"
#include "tools/build_args.h"
#include "deltagen/error.h"

namespace deltagen {

std::vector<std::string> split_flags(const std::string& flags) {
  std::istringstream in(flags);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

BuildOptions parse_build_flags(const std::string& flags) {
  std::vector<std::string> words = split_flags(flags);
  words.insert(words.begin(), "build flags '" + flags + "'");  // Args' argv[0]: names the subject of errors
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());

  Args args(int(argv.size()), argv.data(), build_switches());
  BuildOptions opts = build_options_from_args(args);
  args.finish();
  return normalized_build_options(opts);
}

}  // namespace deltagen
