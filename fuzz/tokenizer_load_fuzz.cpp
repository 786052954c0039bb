// Fuzzes loading a tokenizer (Tokenizer::from_json): tokenizer.json's model
// (vocab, merges), normalizer, pre-tokenizer (regexes compiled from the
// file), decoder and added tokens, and tokenizer_config.json's special
// tokens. Each input is tried twice: as tokenizer.json, and as the
// tokenizer_config.json of a small valid tokenizer.
//
// A tokenizer that loads must then work: encoding a fixed text and decoding
// every id it reports must not crash, and streaming decode must agree with
// decode.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

using namespace deltagen;

namespace {

// The 256 byte-level symbols plus one merge: the smallest tokenizer.json the
// loader accepts, for the tokenizer_config.json half.
const std::string& small_tokenizer_json() {
  static const std::string json = [] {
    std::string vocab;
    // GPT-2's byte-level alphabet: printable Latin-1 stays, the rest maps to U+0100 + n.
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t c = printable ? char32_t(b) : char32_t(0x100 + shifted++);
      std::string utf8;
      if (c < 0x80) {
        utf8 = std::string(1, char(c));
      } else {
        utf8 += char(0xC0 | (c >> 6));
        utf8 += char(0x80 | (c & 0x3F));
      }
      if (utf8 == "\"" || utf8 == "\\") utf8 = "\\" + utf8;
      vocab += (b ? "," : "") + ("\"" + utf8 + "\":" + std::to_string(b));
    }
    vocab += ",\"ab\":256";
    return "{\"model\":{\"type\":\"BPE\",\"vocab\":{" + vocab + "},\"merges\":[[\"a\",\"b\"]]}," +
           "\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false," +
           "\"use_regex\":true},\"decoder\":{\"type\":\"ByteLevel\"},\"added_tokens\":[{\"id\":257,\"content\":" +
           "\"<|end|>\",\"special\":true}]}";
  }();
  return json;
}

void exercise(const Tokenizer& tok) {
  const std::vector<int64_t> ids =
      tok.encode("Hello, world! <|end|> caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd 123\n\n  x");
  for (int64_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) fuzz::finding("encode produced an id outside the vocabulary");
  std::string whole = tok.decode(ids);
  auto stream = tok.incremental_decoder();
  std::string pieces;
  for (int64_t id : ids) pieces += stream.push(id);
  pieces += stream.finish();
  if (pieces != whole) fuzz::finding("streaming decode differs from decode");
  // Every id the tokenizer claims, up to a bound: decodable or an Error.
  const int64_t n = std::min<int64_t>(tok.vocab_size(), 1024);
  for (int64_t id = 0; id < n; ++id) {
    const int64_t one[1] = {id};
    fuzz::expect_only_error("decode", [&] { (void)tok.decode(one); });
  }
  fuzz::expect_only_error("decode", [&] {
    const int64_t bad[2] = {-1, tok.vocab_size()};
    (void)tok.decode(bad);
    fuzz::finding("decode accepted ids outside the vocabulary");
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_only_error("Tokenizer::from_json(tokenizer.json)", [&] { exercise(Tokenizer::from_json(text)); });
  fuzz::expect_only_error("Tokenizer::from_json(tokenizer_config.json)",
                          [&] { exercise(Tokenizer::from_json(small_tokenizer_json(), text)); });
  return 0;
}
