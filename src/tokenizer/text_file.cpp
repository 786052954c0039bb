#include "tokenizer/text_file.h"

#include <fstream>
#include <sstream>

#include "deltagen/error.h"
#include "tokenizer/tokenizer.h"

namespace deltagen {

namespace fs = std::filesystem;

std::string read_file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file.string(), "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string validate_text_file(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) fail(file.string(), "no such file");
  if (fs::is_directory(file, ec)) fail(file.string(), "is a folder, not a text file");
  std::string text = read_file_bytes(file);
  if (text.empty()) fail(file.string(), "the text is empty");
  if (const auto at = find_invalid_utf8(text))
    fail(file.string(), "not valid UTF-8 (byte " + std::to_string(*at) + ")");
  return text;
}

std::vector<int64_t> load_text_for_measuring(const fs::path& file, const fs::path& tokenizer_dir, int64_t min_tokens,
                                             std::string* text_out) {
  std::string text = validate_text_file(file);
  if (!fs::is_regular_file(tokenizer_dir / "tokenizer.json"))
    fail((tokenizer_dir / "tokenizer.json").string(), "missing: the text is encoded with the model's tokenizer");
  std::vector<int64_t> ids = Tokenizer::load(tokenizer_dir).encode(text, EncodeOptions{.parse_special_tokens = false});
  if (int64_t(ids.size()) < min_tokens)
    fail(file.string(), "too short: " + std::to_string(ids.size()) + " tokens, need at least " + std::to_string(min_tokens));
  if (text_out) *text_out = std::move(text);
  return ids;
}

}  // namespace deltagen
