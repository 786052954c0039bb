#include "tokenizer/utf8.h"

#include <cstring>

namespace deltagen::tok {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Valid continuation range for the byte after `lead` (Unicode Table 3-7);
// the later continuation bytes are always 80..BF.
void second_byte_range(unsigned char lead, unsigned char& lower, unsigned char& upper) {
  lower = 0x80;
  upper = 0xBF;
  if (lead == 0xE0)
    lower = 0xA0;  // no overlong 3-byte forms
  else if (lead == 0xED)
    upper = 0x9F;  // no surrogates
  else if (lead == 0xF0)
    lower = 0x90;  // no overlong 4-byte forms
  else if (lead == 0xF4)
    upper = 0x8F;  // nothing above U+10FFFF
}

// Continuation bytes a lead byte needs, or -1 if it cannot start a sequence.
int continuation_count(unsigned char lead) {
  if (lead < 0x80) return 0;
  if (lead >= 0xC2 && lead <= 0xDF) return 1;
  if (lead >= 0xE0 && lead <= 0xEF) return 2;
  if (lead >= 0xF0 && lead <= 0xF4) return 3;
  return -1;
}

bool all_ascii8(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return (w & 0x8080808080808080ull) == 0;
}

}  // namespace

std::optional<char32_t> next_code_point(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  unsigned char lead = p[i];
  int n = continuation_count(lead);
  if (n == 0) return char32_t(s[i++] & 0x7F);
  if (n < 0 || i + n >= s.size()) return std::nullopt;  // bad lead or truncated
  unsigned char lower, upper;
  second_byte_range(lead, lower, upper);
  char32_t cp = lead & (0x3F >> n);
  for (int k = 1; k <= n; ++k) {
    unsigned char b = p[i + k];
    if (b < lower || b > upper) return std::nullopt;
    lower = 0x80;
    upper = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
  }
  i += n + 1;
  return cp;
}

std::optional<size_t> find_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    if (i + 8 <= s.size() && all_ascii8(p + i)) {
      i += 8;
      continue;
    }
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    if (!next_code_point(s, i)) return i;
  }
  return std::nullopt;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The WHATWG "UTF-8 decoder" algorithm, one byte at a time. A byte that breaks
// a sequence ends it with one U+FFFD and is then looked at again as a lead.
void LossyUtf8Decoder::feed(std::string_view bytes, std::string& out) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto b = static_cast<unsigned char>(bytes[i]);
    if (needed_ == 0) {
      int n = continuation_count(b);
      if (n == 0) {
        out.push_back(char(b));
      } else if (n < 0) {
        out += kReplacement;
      } else {
        needed_ = n;
        second_byte_range(b, lower_, upper_);
        pending_.assign(1, char(b));
      }
      continue;
    }
    if (b < lower_ || b > upper_) {
      reset_sequence();
      out += kReplacement;
      --i;  // look at this byte again as the start of a new sequence
      continue;
    }
    pending_.push_back(char(b));
    lower_ = 0x80;
    upper_ = 0xBF;
    if (--needed_ == 0) {
      out += pending_;
      pending_.clear();
    }
  }
}

void LossyUtf8Decoder::flush(std::string& out) {
  if (needed_ == 0) return;
  reset_sequence();
  out += kReplacement;
}

void LossyUtf8Decoder::reset_sequence() {
  pending_.clear();
  needed_ = 0;
  lower_ = 0x80;
  upper_ = 0xBF;
}

}  // namespace deltagen::tok
