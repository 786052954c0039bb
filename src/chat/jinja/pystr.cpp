#include "chat/jinja/pystr.h"

#include <algorithm>
#include <cstdio>

#include "chat/jinja/problem.h"
#include "chat/jinja/work.h"

namespace deltagen::jinja::pystr {

char32_t next(std::string_view s, size_t& i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  if (lead < 0x80) {
    ++i;
    return lead;
  }
  const int extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : 1;
  char32_t cp = lead & (0x3F >> extra);
  for (int k = 1; k <= extra && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += size_t(extra) + 1;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

size_t length(std::string_view s) {
  charge_scan(s.size());
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<size_t> offsets(std::string_view s) {
  charge_scan(s.size());
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  out.push_back(s.size());
  return out;
}

int64_t index_of_byte(std::string_view s, size_t byte) { return int64_t(length(s.substr(0, byte))); }

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

bool is_printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;                     // Cc, NBSP, soft hyphen
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F) return false;  // Arabic Cf
  if (c == 0x180E || c == 0x1680 || (c >= 0x2000 && c <= 0x200F)) return false;            // spaces, ZW*, marks
  if ((c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F)) return false;
  if (c == 0x3000 || (c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF) return false;  // surrogates, private use
  if ((c >= 0xFFF9 && c <= 0xFFFB) || c == 0xFFFE || c == 0xFFFF) return false;
  if (c == 0x110BD || c == 0x110CD || (c >= 0x1BCA0 && c <= 0x1BCA3) || (c >= 0x1D173 && c <= 0x1D17A)) return false;
  if (c == 0xE0001 || (c >= 0xE0020 && c <= 0xE007F) || c >= 0xF0000) return false;  // tags, private use
  return true;
}

std::string_view strip(std::string_view s, const std::optional<std::string_view>& chars, bool left, bool right) {
  auto strippable = [&](char32_t c) {
    if (!chars) return is_space(c);
    for (size_t i = 0; i < chars->size();)
      if (next(*chars, i) == c) return true;
    return false;
  };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t i = begin;
      if (!strippable(next(s, i))) break;
      begin = i;
    }
  }
  if (right) {
    while (end > begin) {
      size_t k = end - 1;
      while (k > begin && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
      size_t i = k;
      if (!strippable(next(s, i))) break;
      end = k;
    }
  }
  return s.substr(begin, end - begin);
}

namespace {

// Byte length of the whitespace code point at s[i], 0 if there is none.
size_t space_at(std::string_view s, size_t i) {
  size_t j = i;
  return is_space(next(s, j)) ? j - i : 0;
}

std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    while (i < s.size()) {
      const size_t n = space_at(s, i);
      if (n == 0) break;
      i += n;
    }
    if (i >= s.size()) break;
    if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
      out.emplace_back(s.substr(i));
      break;
    }
    size_t j = i;
    while (j < s.size() && space_at(s, j) == 0) next(s, j);
    out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

std::vector<std::string> split(std::string_view s, const std::optional<std::string_view>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(s, maxsplit);
  if (sep->empty()) problem("empty separator");
  std::vector<std::string> out;
  size_t start = 0;
  while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
    const size_t at = s.find(*sep, start);
    if (at == std::string_view::npos) break;
    out.emplace_back(s.substr(start, at - start));
    start = at + sep->size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string_view>& sep, int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (!sep) {
    // Whitespace runs from the right: collect words, keep the rest whole.
    size_t end = s.size();
    while (true) {
      auto trimmed = strip(s.substr(0, end), std::nullopt, false, true);
      end = trimmed.size();
      if (end == 0) break;
      if (int64_t(out.size()) == maxsplit) {
        out.emplace_back(trimmed);
        break;
      }
      size_t begin = end;
      while (begin > 0) {
        size_t k = begin - 1;
        while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        if (space_at(s, k) != 0) break;
        begin = k;
      }
      out.emplace_back(s.substr(begin, end - begin));
      end = begin;
    }
  } else {
    if (sep->empty()) problem("empty separator");
    size_t end = s.size();
    while (int64_t(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(s.substr(0, end));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    const size_t at = i;
    const char32_t c = next(s, i);
    if (!is_line_break(c)) continue;
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    out.emplace_back(s.substr(start, (keepends ? i : at) - start));
    start = i;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

int64_t find(std::string_view s, std::string_view sub) {
  charge_scan(s.size());
  const size_t at = s.find(sub);
  return at == std::string_view::npos ? -1 : index_of_byte(s, at);
}

int64_t rfind(std::string_view s, std::string_view sub) {
  charge_scan(s.size());
  const size_t at = s.rfind(sub);
  return at == std::string_view::npos ? -1 : index_of_byte(s, at);
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return int64_t(length(s)) + 1;
  charge_scan(s.size());
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count_limit,
                    size_t max_bytes) {
  // The number of replacements first, so the size is known before building.
  int64_t n = count(s, old);
  if (count_limit >= 0) n = std::min(n, count_limit);
  const long double size =
      (long double)s.size() + (long double)n * ((long double)with.size() - (long double)old.size());
  if (size > (long double)max_bytes)
    problem("string too long: replace would make " + std::to_string((uint64_t)size) + " bytes");
  std::string out;
  out.reserve(size_t(size));
  if (old.empty()) {
    // Python inserts `with` before every code point and at the end.
    int64_t done = 0;
    size_t i = 0;
    while (i < s.size()) {
      if (done < n) {
        out += with;
        ++done;
      }
      const size_t begin = i;
      next(s, i);
      out += s.substr(begin, i - begin);
    }
    if (done < n) out += with;
    return out;
  }
  size_t start = 0;
  for (int64_t done = 0; done < n; ++done) {
    const size_t at = s.find(old, start);
    out += s.substr(start, at - start);
    out += with;
    start = at + old.size();
  }
  out += s.substr(start);
  return out;
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    const size_t begin = i;
    const char32_t c = next(s, i);
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!is_printable(c)) {
      char buf[16];
      if (c <= 0xFF)
        std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(c));
      else if (c <= 0xFFFF)
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", unsigned(c));
      out += buf;
    } else {
      out += s.substr(begin, i - begin);
    }
  }
  out += quote;
  return out;
}

}  // namespace deltagen::jinja::pystr
