#include "measure/corpus.h"

#include <cctype>
#include <charconv>
#include <string>

#include "tokenizer/text_file.h"
#include "tokenizer/tokenizer.h"
#include "deltagen/error.h"

namespace deltagen::measure {

namespace fs = std::filesystem;

std::vector<int64_t> pseudo_random_ids(int64_t count, int64_t vocab, uint64_t seed) {
  if (vocab <= 0) fail("corpus", "the vocabulary size is unknown");
  std::vector<int64_t> ids(size_t(std::max<int64_t>(count, 0)));
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x243F6A8885A308D3ull;
  for (auto& id : ids) {
    // splitmix64: the same stream on every platform, unlike std:: distributions.
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    id = int64_t(z % uint64_t(vocab));
  }
  return ids;
}

std::vector<int64_t> read_ids_file(const fs::path& file) {
  const std::string text = read_file_bytes(file);
  std::vector<int64_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c) || c == ',') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) && text[end] != ',') ++end;
    int64_t id = -1;
    auto [p, ec] = std::from_chars(text.data() + i, text.data() + end, id);
    if (ec != std::errc() || p != text.data() + end || id < 0)
      fail(file.string(), "not a token id: '" + text.substr(i, std::min<size_t>(end - i, 40)) + "'");
    ids.push_back(id);
    i = end;
  }
  if (ids.empty()) fail(file.string(), "no token ids in the file");
  return ids;
}

std::vector<int64_t> encode_text_file(const fs::path& file, const fs::path& tokenizer_dir) {
  if (!fs::exists(tokenizer_dir / "tokenizer.json"))
    fail((tokenizer_dir / "tokenizer.json").string(),
         "missing: --corpus needs the model's tokenizer (use --ids-file for token ids)");
  const std::string text = read_file_bytes(file);
  // Text from a corpus file is data, not a prompt: special-token markup in it
  // stays ordinary text.
  std::vector<int64_t> ids = Tokenizer::load(tokenizer_dir).encode(text, EncodeOptions{.parse_special_tokens = false});
  if (ids.empty()) fail(file.string(), "the corpus is empty");
  return ids;
}

}  // namespace deltagen::measure
