// GPT-2's byte-level alphabet: every byte 0..255 has a printable stand-in
// character, so a vocabulary of byte strings can be written as Unicode text.
// tokenizer.json stores vocab and merges in this alphabet; internally the
// tokenizer works on raw bytes and uses these tables only at the edges.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deltagen::tok {

// The stand-in character of `byte` (e.g. ' ' -> U+0120 'Ġ').
char32_t byte_to_char(uint8_t byte);

// The byte a stand-in character represents, or nullopt for characters outside
// the alphabet.
std::optional<uint8_t> char_to_byte(char32_t c);

// "Ġhello" -> " hello". nullopt when `text` (UTF-8) contains a character
// outside the alphabet.
std::optional<std::string> byte_level_to_bytes(std::string_view text);

// " hello" -> "Ġhello" (UTF-8).
std::string bytes_to_byte_level(std::string_view bytes);

}  // namespace deltagen::tok
