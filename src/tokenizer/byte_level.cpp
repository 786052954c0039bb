#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace deltagen::tok {
namespace {

// Bytes that are printable (and not space) in Latin-1 keep their own code
// point; the other 68 bytes get U+0100, U+0101, ... in byte order.
bool keeps_own_code_point(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> char_of_byte{};
  std::array<int16_t, 0x144> byte_of_char{};  // the stand-ins all lie below U+0144
  Tables() {
    byte_of_char.fill(-1);
    char32_t next_extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      char32_t c = keeps_own_code_point(b) ? char32_t(b) : next_extra++;
      char_of_byte[b] = c;
      byte_of_char[c] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(uint8_t byte) { return tables().char_of_byte[byte]; }

std::optional<uint8_t> char_to_byte(char32_t c) {
  const auto& t = tables();
  if (c >= t.byte_of_char.size() || t.byte_of_char[c] < 0) return std::nullopt;
  return uint8_t(t.byte_of_char[c]);
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    auto cp = next_code_point(text, i);
    if (!cp) return std::nullopt;
    auto b = char_to_byte(*cp);
    if (!b) return std::nullopt;
    bytes.push_back(char(*b));
  }
  return bytes;
}

std::string bytes_to_byte_level(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(text, byte_to_char(b));
  return text;
}

}  // namespace deltagen::tok
