// deltagen tokenize: text -> token ids, or ids -> text, with a Hugging Face
// tokenizer.json.
//   deltagen tokenize --tokenizer DIR (--text T | --text-file F) [--json]
//   deltagen tokenize --tokenizer DIR --decode --ids 1,2,3 [--json]
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (auto bad = find_invalid_utf8(text)) fail(path, "invalid UTF-8 at byte offset " + std::to_string(*bad));
  return text;
}

void print_ids(const std::vector<int64_t>& ids, bool as_json) {
  std::string line = as_json ? "[" : "";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += as_json ? "," : " ";
    line += std::to_string(ids[i]);
  }
  if (as_json) line += "]";
  std::printf("%s\n", line.c_str());
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  Args args(argc, argv, {"json", "decode"});
  const std::string dir = args.require("tokenizer");
  const bool as_json = args.flag("json");
  const bool decode = args.flag("decode");
  if (decode) {
    if (!args.has("ids")) fail("tokenize", "--decode needs --ids 1,2,3");
    if (args.has("text") || args.has("text-file")) fail("tokenize", "--decode takes --ids, not --text or --text-file");
    std::vector<int64_t> ids = args.get_ids("ids");
    args.finish();
    std::string text = Tokenizer::load(dir).decode(ids);
    // With --json the text comes back exactly (a JSON string); otherwise as a line.
    std::string out = as_json ? nlohmann::json(text).dump() : text;
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  auto text = args.get("text");
  auto text_file = args.get("text-file");
  args.finish();
  if (text.has_value() == text_file.has_value()) fail("tokenize", "give exactly one of --text and --text-file");
  std::string input = text ? *text : read_text_file(*text_file);
  print_ids(Tokenizer::load(dir).encode(input), as_json);
  return 0;
}

}  // namespace deltagen
