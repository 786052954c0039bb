// UTF-8 helpers for the tokenizer: strict validation (encode refuses bad
// input), code point iteration, and the lossy streaming decoder that turns
// token bytes back into text the way Hugging Face's decoders do.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deltagen::tok {

// Offset of the first byte that does not start a well-formed UTF-8 sequence
// (overlong forms, surrogates and code points above U+10FFFF are ill-formed),
// or nullopt when all of `s` is valid.
std::optional<size_t> find_invalid_utf8(std::string_view s);

// Decodes the code point at s[i] and advances i past it; nullopt (i unchanged)
// if the bytes there are not well-formed.
std::optional<char32_t> next_code_point(std::string_view s, size_t& i);

// Length in bytes of the sequence a lead byte starts (1 for invalid leads).
inline size_t utf8_sequence_length(unsigned char lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 1;
}

void append_utf8(std::string& out, char32_t cp);

// Unicode's White_Space property (what Oniguruma's \s and Rust's
// char::is_whitespace mean).
bool is_white_space(char32_t cp);

// Decodes a byte stream to valid UTF-8 text, replacing each maximal ill-formed
// subsequence with U+FFFD exactly as the WHATWG TextDecoder and Rust's
// String::from_utf8_lossy do. Bytes of a sequence that may still be completed
// are held back, so the output never ends in half a character.
class LossyUtf8Decoder {
 public:
  // Appends the text that `bytes` completes to `out`.
  void feed(std::string_view bytes, std::string& out);
  // Ends the stream: an incomplete trailing sequence becomes one U+FFFD.
  void flush(std::string& out);
  bool has_pending() const { return needed_ != 0; }

 private:
  void reset_sequence();

  std::string pending_;                        // bytes of the sequence being completed
  int needed_ = 0;                             // continuation bytes the lead byte promised
  unsigned char lower_ = 0x80, upper_ = 0xBF;  // allowed range of the next continuation byte
};

}  // namespace deltagen::tok
