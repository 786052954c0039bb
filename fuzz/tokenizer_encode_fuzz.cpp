// Fuzzes encoding and decoding arbitrary bytes with a real tokenizer: the
// tokenizer DELTAGEN_FUZZ_TOKENIZER names (a tokenizer.json or its folder),
// else Qwen3's from third_party/tokenizer/qwen3 (scripts/fetch_tokenizer_assets.sh).
//
// Properties checked:
//   - encode throws Error exactly for invalid UTF-8, else returns ids inside
//     the vocabulary, with and without special-token parsing;
//   - decode(encode(text)) == text when normalization leaves text unchanged
//     (checked for ASCII-only text: NFC never changes it);
//   - the streaming decoder's pieces concatenate to decode(ids);
//   - the input read as little-endian 32-bit ids (taken modulo the vocabulary
//     size, and once raw) decodes or throws Error, streaming or not, and the
//     two ways agree.
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

using namespace deltagen;

namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer tok = [] {
    if (const char* p = std::getenv("DELTAGEN_FUZZ_TOKENIZER")) return Tokenizer::load(p);
    for (const char* p : {"third_party/tokenizer/qwen3", "../third_party/tokenizer/qwen3"})
      if (fuzz::fs::is_regular_file(fuzz::fs::path(p) / "tokenizer.json")) return Tokenizer::load(p);
    std::fprintf(stderr, "tokenizer_encode_fuzz: set DELTAGEN_FUZZ_TOKENIZER to a tokenizer.json "
                         "(or run scripts/fetch_tokenizer_assets.sh)\n");
    std::exit(2);
  }();
  return tok;
}

bool ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

std::string stream_decode(const Tokenizer& tok, const std::vector<int64_t>& ids, const DecodeOptions& o) {
  auto stream = tok.incremental_decoder(o);
  std::string out;
  for (int64_t id : ids) out += stream.push(id);
  return out + stream.finish();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();  // load once, before the first input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Tokenizer& tok = tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool valid = !find_invalid_utf8(text).has_value();

  for (bool special : {true, false}) {
    std::vector<int64_t> ids;
    const bool encoded = fuzz::expect_only_error("encode", [&] { ids = tok.encode(text, {.parse_special_tokens = special}); });
    if (encoded != valid) fuzz::finding(valid ? "encode refused valid UTF-8" : "encode accepted invalid UTF-8");
    if (!encoded) continue;
    for (int64_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) fuzz::finding("encode produced an id outside the vocabulary");
    std::string back;
    fuzz::expect_only_error("decode", [&] { back = tok.decode(ids); });
    if (ascii(text) && back != text) fuzz::finding("decode(encode(text)) != text for ASCII text");
    if (stream_decode(tok, ids, {}) != back) fuzz::finding("streaming decode differs from decode");
  }

  // The bytes as token ids (what a corrupted id list from a client looks like).
  std::vector<int64_t> ids(size / 4), raw(size / 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t v;
    std::memcpy(&v, data + 4 * i, 4);
    raw[i] = v;
    ids[i] = int64_t(uint32_t(v) % uint64_t(tok.vocab_size()));
  }
  fuzz::expect_only_error("decode(raw ids)", [&] { (void)tok.decode(raw); });
  for (bool skip : {false, true}) {
    std::string whole;
    if (!fuzz::expect_only_error("decode(ids)", [&] { whole = tok.decode(ids, {.skip_special_tokens = skip}); }))
      continue;
    if (stream_decode(tok, ids, {.skip_special_tokens = skip}) != whole)
      fuzz::finding("streaming decode differs from decode for arbitrary ids");
  }
  return 0;
}
