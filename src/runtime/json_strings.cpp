// The automaton's strings (runtime/json_machine.h): UTF-8 checked byte by
// byte (no overlong forms, no encoded surrogates, nothing above U+10FFFF),
// escapes decoded, and the decoded text walked through a trie where the
// string must be one of a set (enum values, the keys of a closed object).
//
// Such a string never reaches a dead end: a byte, a backslash or a \u hex
// digit is taken only if some character it can still become continues the
// trie towards a value that may still come (for keys: a property not yet
// present, whose value fits in the remaining depth).
#include <algorithm>

#include "runtime/json_machine.h"

namespace deltagen::json_rules {
namespace {

// Code points a \u escape can still become: up to three ranges.
struct Ranges {
  uint32_t lo[3] = {}, hi[3] = {};
  int n = 0;
  void add(uint32_t a, uint32_t b) {
    if (a <= b) {
      lo[n] = a;
      hi[n] = b;
      ++n;
    }
  }
  bool contains(uint32_t c) const {
    for (int i = 0; i < n; ++i)
      if (c >= lo[i] && c <= hi[i]) return true;
    return false;
  }
};

int hex_value(uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

// The byte a one-character escape stands for, or -1.
int simple_escape(uint8_t b) {
  switch (b) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return -1;
  }
}

bool strict(Kind k) { return k == Kind::EnumString || k == Kind::ClosedKey; }

}  // namespace

Machine::Step Machine::string(Stack& s, uint8_t b) const {
  Frame& f = s.top();
  auto begin_char = [&] {  // a code point begins: is there room for it?
    if (f.kind != Kind::String) return true;
    if (f.count >= r_.nodes[f.node].max_length) return false;
    ++f.count;
    return true;
  };
  auto go = [&](bool ok, uint8_t phase) {
    if (!ok) return Step::Rejected;
    f.phase = phase;
    return Step::Taken;
  };
  switch (f.phase) {
    case kText: {
      if (b == '"') return close_string(s);
      if (b == '\\') return go(begin_char() && escape_possible(s, 0, -1, false), kEscape);
      uint8_t next;
      if (b < 0x20) {
        return Step::Rejected;  // control characters must be escaped
      } else if (b < 0x80) {
        next = kText;
      } else if (b >= 0xC2 && b <= 0xDF) {
        next = kTail1;
      } else if (b == 0xE0) {
        next = kTailE0;
      } else if (b == 0xED) {
        next = kTailED;
      } else if (b >= 0xE1 && b <= 0xEF) {
        next = kTail2;
      } else if (b == 0xF0) {
        next = kTailF0;
      } else if (b >= 0xF1 && b <= 0xF3) {
        next = kTail3;
      } else if (b == 0xF4) {
        next = kTailF4;
      } else {
        return Step::Rejected;  // a continuation byte, C0, C1, F5-FF
      }
      return go(begin_char() && to_trie(s, b), next);
    }
    case kTail1:
    case kTail2:
    case kTail3:
    case kTailE0:
    case kTailED:
    case kTailF0:
    case kTailF4: {
      uint8_t lo = 0x80, hi = 0xBF, next;
      switch (f.phase) {
        case kTail1: next = kText; break;
        case kTail2: next = kTail1; break;
        case kTail3: next = kTail2; break;
        case kTailE0: lo = 0xA0, next = kTail1; break;  // not overlong
        case kTailED: hi = 0x9F, next = kTail1; break;  // not a surrogate
        case kTailF0: lo = 0x90, next = kTail2; break;  // not overlong
        default: hi = 0x8F, next = kTail2; break;       // F4: not above U+10FFFF
      }
      return go(b >= lo && b <= hi && to_trie(s, b), next);
    }
    case kEscape: {
      if (b == 'u') {
        f.unit = 0;
        return go(escape_possible(s, 0, 0, false), kHex0);
      }
      const int decoded = simple_escape(b);
      return go(decoded >= 0 && to_trie(s, uint8_t(decoded)), kText);
    }
    case kLowBackslash: return go(b == '\\', kLowU);
    case kLowU:
      f.unit = 0;
      return go(b == 'u', kLowHex0);
    default: {  // kHex0..3, kLowHex0..3: a hex digit
      const int d = hex_value(b);
      if (d < 0) return Step::Rejected;
      const bool low = f.phase >= kLowHex0;
      const int digits = (low ? f.phase - kLowHex0 : f.phase - kHex0) + 1;
      const uint32_t unit = uint32_t(f.unit) * 16 + uint32_t(d);
      if (!escape_possible(s, unit, digits, low)) return Step::Rejected;
      if (digits < 4) {
        f.unit = uint16_t(unit);
        f.phase = uint8_t(f.phase + 1);
        return Step::Taken;
      }
      f.unit = 0;
      if (!low && unit >= 0xD800 && unit <= 0xDBFF) {  // a high surrogate: its pair must follow
        f.bits = unit;
        f.phase = kLowBackslash;
        return Step::Taken;
      }
      const uint32_t code_point = low ? 0x10000 + (uint32_t(f.bits - 0xD800) << 10) + (unit - 0xDC00) : unit;
      f.bits = 0;
      return go(emit(s, code_point), kText);
    }
  }
}

Machine::Step Machine::close_string(Stack& s) const {
  const Frame& f = s.top();
  switch (f.kind) {
    case Kind::String:
      if (f.count < r_.nodes[f.node].min_length) return Step::Rejected;
      break;
    case Kind::EnumString:
      if (r_.trie[f.trie].value < 0) return Step::Rejected;
      break;
    default: {  // a key: which property's value comes next?
      Frame& object = s.frames[s.size - 2];
      uint32_t property = kNone;
      if (f.trie != kNone && r_.trie[f.trie].value >= 0) {
        property = uint32_t(r_.trie[f.trie].value);
        if (object.bits >> property & 1) return Step::Rejected;  // present already, or its value cannot fit
        object.bits |= uint64_t(1) << property;
      } else if (f.kind == Kind::ClosedKey) {
        return Step::Rejected;
      }
      object.count = property;
      --s.size;
      object.phase = kColon;
      return Step::Taken;
    }
  }
  end_value(s);
  return Step::Taken;
}

// Moves a string frame's trie position along one decoded byte.
bool Machine::to_trie(Stack& s, uint8_t byte) const {
  Frame& f = s.top();
  if (f.kind == Kind::String || f.trie == kNone) return true;
  const uint32_t next = r_.child(f.trie, byte);
  if (f.kind == Kind::Key) {  // an open object: leaving the trie makes it another key
    f.trie = next;
    return true;
  }
  if (next == kNone) return false;
  if (f.kind == Kind::ClosedKey && !(r_.trie[next].below & ~s.frames[s.size - 2].bits)) return false;
  f.trie = next;
  return true;
}

bool Machine::emit(Stack& s, uint32_t c) const {
  uint8_t bytes[4];
  int n;
  if (c < 0x80) {
    bytes[0] = uint8_t(c);
    n = 1;
  } else if (c < 0x800) {
    bytes[0] = uint8_t(0xC0 | c >> 6);
    bytes[1] = uint8_t(0x80 | (c & 0x3F));
    n = 2;
  } else if (c < 0x10000) {
    bytes[0] = uint8_t(0xE0 | c >> 12);
    bytes[1] = uint8_t(0x80 | (c >> 6 & 0x3F));
    bytes[2] = uint8_t(0x80 | (c & 0x3F));
    n = 3;
  } else {
    bytes[0] = uint8_t(0xF0 | c >> 18);
    bytes[1] = uint8_t(0x80 | (c >> 12 & 0x3F));
    bytes[2] = uint8_t(0x80 | (c >> 6 & 0x3F));
    bytes[3] = uint8_t(0x80 | (c & 0x3F));
    n = 4;
  }
  for (int i = 0; i < n; ++i)
    if (!to_trie(s, bytes[i])) return false;
  return true;
}

// Whether an escape can still end well. digits = -1: the backslash itself
// (any character will do); else the \u unit so far, `digits` hex digits of it
// read (0-4), `low` for the second half of a surrogate pair. Lone surrogates
// are refused: strict parsers reject them.
bool Machine::escape_possible(const Stack& s, uint32_t unit, int digits, bool low) const {
  const Frame& f = s.top();
  Ranges can;
  if (digits < 0) {
    can.add(0, 0x10FFFF);
  } else {
    const uint32_t span = 1u << (4 * (4 - digits));
    uint32_t lo = unit * span, hi = lo + span - 1;
    if (low) {
      const uint32_t base = 0x10000 + ((uint32_t(f.bits) - 0xD800) << 10);
      lo = std::max<uint32_t>(lo, 0xDC00);
      hi = std::min<uint32_t>(hi, 0xDFFF);
      if (lo <= hi) can.add(base + lo - 0xDC00, base + hi - 0xDC00);
    } else {
      can.add(lo, std::min<uint32_t>(hi, 0xD7FF));
      can.add(std::max<uint32_t>(lo, 0xE000), hi);
      const uint32_t a = std::max<uint32_t>(lo, 0xD800), b = std::min<uint32_t>(hi, 0xDBFF);
      if (a <= b) can.add(0x10000 + ((a - 0xD800) << 10), 0x10000 + ((b - 0xD800) << 10) + 0x3FF);
    }
  }
  if (can.n == 0) return false;
  if (!strict(f.kind)) return true;
  // Some character in the trie after f.trie: its UTF-8 bytes decoded, in range, leading somewhere allowed.
  const uint64_t present = f.kind == Kind::ClosedKey ? s.frames[s.size - 2].bits : 0;
  auto fine = [&](uint32_t t, uint32_t c) {
    return can.contains(c) && (f.kind == Kind::EnumString || (r_.trie[t].below & ~present));
  };
  auto descend = [&](auto&& self, uint32_t t, int left, uint32_t c) -> bool {
    if (left == 0) return fine(t, c);
    const TrieNode& n = r_.trie[t];
    for (uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e)
      if ((r_.edges[e].byte & 0xC0) == 0x80 && self(self, r_.edges[e].child, left - 1, c << 6 | (r_.edges[e].byte & 0x3F)))
        return true;
    return false;
  };
  const TrieNode& n = r_.trie[f.trie];
  for (uint32_t e = n.first_edge; e < n.first_edge + n.edge_count; ++e) {
    const uint8_t b = r_.edges[e].byte;
    const int left = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2 : (b & 0xF8) == 0xF0 ? 3 : -1;
    const uint32_t first = left == 0 ? b : left == 1 ? b & 0x1F : left == 2 ? b & 0x0F : b & 0x07;
    if (left >= 0 && descend(descend, r_.edges[e].child, left, first)) return true;
  }
  return false;
}

}  // namespace deltagen::json_rules
