// Case mapping for pystr: lower/upper/title/capitalize/swapcase as CPython's
// str methods do them, for the scripts listed in pystr.h. Within those blocks
// the mapping follows UnicodeData.txt, including the few one-to-many
// mappings Python applies (ß -> SS, İ -> i̇) and Greek final sigma.
#include <string>

#include "chat/jinja/pystr.h"
#include "chat/jinja/work.h"

namespace deltagen::jinja::pystr {
namespace {

// Blocks where upper and lower case alternate: even = upper, odd = lower
// (or the reverse, `odd_upper`).
struct AlternatingRange {
  char32_t first, last;
  bool odd_upper;
};
constexpr AlternatingRange kAlternating[] = {
    {0x0100, 0x012F, false}, {0x0132, 0x0137, false}, {0x0139, 0x0148, true},  {0x014A, 0x0177, false},
    {0x0179, 0x017E, true},  {0x0182, 0x0185, false}, {0x01A0, 0x01A5, false}, {0x01CD, 0x01DC, true},
    {0x01DE, 0x01EF, false}, {0x01F8, 0x021F, false}, {0x0222, 0x0233, false}, {0x0246, 0x024F, false},
    {0x03D8, 0x03EF, false}, {0x0460, 0x0481, false}, {0x048A, 0x04BF, false}, {0x04C1, 0x04CE, true},
    {0x04D0, 0x052F, false}, {0x1E00, 0x1E95, false}, {0x1EA0, 0x1EFF, false},
};

// Blocks where lower case = upper case + offset.
struct ShiftedRange {
  char32_t upper_first, upper_last;
  char32_t offset;
};
constexpr ShiftedRange kShifted[] = {
    {'A', 'Z', 32},       {0x00C0, 0x00D6, 32}, {0x00D8, 0x00DE, 32}, {0x0391, 0x03A1, 32},
    {0x03A3, 0x03AB, 32}, {0x0388, 0x038A, 37}, {0x038E, 0x038F, 63}, {0x0400, 0x040F, 80},
    {0x0410, 0x042F, 32}, {0x0531, 0x0556, 48}, {0xFF21, 0xFF3A, 32},
};

// Single pairs outside the blocks above.
struct Pair {
  char32_t upper, lower;
};
constexpr Pair kPairs[] = {
    {0x0178, 0x00FF}, {0x0386, 0x03AC}, {0x038C, 0x03CC}, {0x04C0, 0x04CF}, {0x0187, 0x0188},
    {0x018B, 0x018C}, {0x0191, 0x0192}, {0x0130, 0x0069}, {0x1E9E, 0x00DF}, {0x0198, 0x0199},
    {0x01A7, 0x01A8}, {0x01AC, 0x01AD}, {0x01AF, 0x01B0}, {0x01B3, 0x01B4}, {0x01B5, 0x01B6},
    {0x01B8, 0x01B9}, {0x01BC, 0x01BD}, {0x01F4, 0x01F5}, {0x023B, 0x023C}, {0x0241, 0x0242},
};

// Lower-case letters whose upper case is not their pair above.
constexpr Pair kUpperOnly[] = {
    {0x039C, 0x00B5},  // µ -> Μ
    {0x0053, 0x017F},  // ſ -> S
    {0x0049, 0x0131},  // ı -> I
    {0x03A3, 0x03C2},  // ς -> Σ
};

// The Latin digraphs with three forms: DŽ (upper), ǅ (title), ǆ (lower), and LJ, NJ, DZ.
constexpr char32_t kDigraphUpper[] = {0x01C4, 0x01C7, 0x01CA, 0x01F1};

// The upper form of c's digraph, or 0 if c is not one.
char32_t digraph(char32_t c) {
  for (char32_t u : kDigraphUpper)
    if (c >= u && c <= u + 2) return u;
  return 0;
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  if (const char32_t u = digraph(c)) return u + 2;
  for (const auto& r : kShifted)
    if (c >= r.upper_first && c <= r.upper_last) return c + r.offset;
  for (const auto& r : kAlternating)
    if (c >= r.first && c <= r.last) return ((c & 1) != 0) == r.odd_upper ? c + 1 : c;
  for (const auto& p : kPairs)
    if (c == p.upper) return p.lower;
  return c;
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  if (const char32_t u = digraph(c)) return u;
  for (const auto& p : kUpperOnly)
    if (c == p.lower) return p.upper;
  for (const auto& r : kShifted)
    if (c >= r.upper_first + r.offset && c <= r.upper_last + r.offset) return c - r.offset;
  for (const auto& r : kAlternating)
    if (c >= r.first && c <= r.last) return ((c & 1) != 0) != r.odd_upper ? c - 1 : c;
  for (const auto& p : kPairs)
    if (c == p.lower) return p.upper;
  return c;
}

// Lower-case letters without an upper-case partner (still cased).
bool caseless_lower(char32_t c) { return c == 0x00DF || c == 0x0138 || c == 0x0149 || c == 0x0390 || c == 0x03B0; }

// The one-to-many mappings Python applies; false when `c` maps to one code point.
bool append_special_upper(std::string& out, char32_t c) {
  if (c == 0x00DF) {  // ß
    out += "SS";
    return true;
  }
  if (c == 0x0149) {  // ŉ
    append(out, 0x02BC);
    out += 'N';
    return true;
  }
  return false;
}

bool append_special_lower(std::string& out, char32_t c) {
  if (c == 0x0130) {  // İ -> i + combining dot above
    out += 'i';
    append(out, 0x0307);
    return true;
  }
  return false;
}

void append_upper(std::string& out, char32_t c) {
  if (!append_special_upper(out, c)) append(out, to_upper(c));
}

// Title case: upper case, except the digraphs' middle form and ß -> Ss.
void append_title(std::string& out, char32_t c) {
  if (const char32_t u = digraph(c)) return append(out, u + 1);
  if (c == 0x00DF) {
    out += "Ss";
    return;
  }
  append_upper(out, c);
}

// Greek capital sigma lowers to final sigma at the end of a word: preceded by
// a cased letter and not followed by one (Unicode's Final_Sigma, which
// CPython's str.lower() applies). Case-ignorable characters are not skipped:
// a simplification that only matters for apostrophes inside Greek words.
char32_t lower_sigma(std::string_view s, size_t begin, size_t end) {
  bool cased_before = false;
  if (begin > 0) {
    size_t k = begin - 1;
    while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    size_t j = k;
    cased_before = is_cased(next(s, j));
  }
  bool cased_after = false;
  if (end < s.size()) {
    size_t j = end;
    cased_after = is_cased(next(s, j));
  }
  return cased_before && !cased_after ? 0x03C2 : 0x03C3;
}

void append_lower(std::string& out, std::string_view s, size_t begin, size_t end, char32_t c) {
  if (c == 0x03A3) {
    append(out, lower_sigma(s, begin, end));
    return;
  }
  if (!append_special_lower(out, c)) append(out, to_lower(c));
}

}  // namespace

bool is_cased(char32_t c) { return to_lower(c) != c || to_upper(c) != c || caseless_lower(c); }

bool is_lower(std::string_view s) {
  charge_scan(s.size());
  bool any = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = next(s, i);
    if (to_lower(c) != c) return false;
    any |= is_cased(c);
  }
  return any;
}

bool is_upper(std::string_view s) {
  charge_scan(s.size());
  bool any = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = next(s, i);
    if (to_upper(c) != c || caseless_lower(c)) return false;
    any |= is_cased(c);
  }
  return any;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t begin = i;
    const char32_t c = next(s, i);
    append_lower(out, s, begin, i, c);
  }
  return out;
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) append_upper(out, next(s, i));
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t begin = i;
    const char32_t c = next(s, i);
    if (begin == 0)
      append_title(out, c);
    else
      append_lower(out, s, begin, i, c);
  }
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for (size_t i = 0; i < s.size();) {
    const size_t begin = i;
    const char32_t c = next(s, i);
    if (previous_cased)
      append_lower(out, s, begin, i, c);
    else
      append_title(out, c);
    previous_cased = is_cased(c);
  }
  return out;
}

std::string swapcase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t begin = i;
    const char32_t c = next(s, i);
    if (to_lower(c) != c)
      append_lower(out, s, begin, i, c);
    else if (to_upper(c) != c || caseless_lower(c))
      append_upper(out, c);
    else
      append(out, c);
  }
  return out;
}

}  // namespace deltagen::jinja::pystr
