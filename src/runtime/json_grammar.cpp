// JsonGrammar: the automaton's byte step for containers, numbers and literals
// (strings are in json_strings.cpp), and the public class around it.
#include "runtime/json_grammar.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "deltagen/error.h"
#include "runtime/json_machine.h"
#include "runtime/json_rules.h"

namespace deltagen {
namespace json_rules {
namespace {

bool is_space(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool is_digit(uint8_t b) { return b >= '0' && b <= '9'; }

}  // namespace

void Machine::start(Stacks& st) const {
  st.count = 1;
  Stack& s = st.stacks[0];
  s.size = 1;
  s.spaces = 0;
  s.frames[0] = Frame{0, r_.root, 0, kNone, 0, Kind::Root, kValue};
}

bool Machine::feed(Stacks& st, uint8_t b) const {
  if (st.count == 1) {  // the hot case: plain ASCII inside a string with nothing to match
    Stack& s = st.stacks[0];
    Frame& f = s.top();
    if (f.phase == kText && (f.kind == Kind::String || (f.kind == Kind::Key && f.trie == kNone)) && b >= 0x20 &&
        b < 0x80 && b != '"' && b != '\\') {
      if (f.kind == Kind::String) {
        if (f.count >= r_.nodes[f.node].max_length) return false;
        ++f.count;
      }
      s.spaces = 0;  // 0 already: the opening quote reset it
      return true;
    }
  }
  const int before = st.count;
  bool ok[kMaxStacks];
  for (int i = 0; i < before; ++i) ok[i] = feed_stack(st, i, b);
  for (int i = before; i < st.count; ++i) ok[i] = true;  // forks made while feeding: they took b
  int kept = 0;
  for (int i = 0; i < st.count; ++i) {
    if (!ok[i]) continue;
    bool duplicate = false;  // two readings that met again (after an anyOf's alternatives end alike)
    for (int j = 0; j < kept && !duplicate; ++j) duplicate = st.stacks[j].same_as(st.stacks[i]);
    if (duplicate) continue;
    if (kept != i) st.stacks[kept].copy_from(st.stacks[i]);
    ++kept;
  }
  st.count = kept;
  return kept > 0;
}

bool Machine::feed_stack(Stacks& st, int i, uint8_t b) const {
  Stack& s = st.stacks[i];
  if (!is_space(b)) s.spaces = 0;
  for (;;) {
    Step step;
    switch (s.top().kind) {
      case Kind::Root: step = root(st, i, b); break;
      case Kind::Object: step = object(st, i, b); break;
      case Kind::Array: step = array(st, i, b); break;
      case Kind::Number: step = number(s.top(), b); break;
      case Kind::Literal: step = literal(s, b); break;
      default: step = string(s, b); break;
    }
    if (step != Step::Ended) return step == Step::Taken;
    end_value(s);  // a number or literal ended just before b: the parent takes b
  }
}

bool Machine::complete(const Stacks& st) const {
  for (int i = 0; i < st.count; ++i) {
    const Stack& s = st.stacks[i];
    const Frame& f = s.top();
    if (f.kind == Kind::Root && f.phase == kAfter) return true;
    if (s.size != 2) continue;  // only a number or literal directly at the root can end without a byte
    if (f.kind == Kind::Number && number_may_end(f)) return true;
    if (f.kind == Kind::Literal && r_.trie[f.trie].value >= 0) return true;
  }
  return false;
}

Machine::Step Machine::space(Stack& s) const {
  if (s.spaces >= r_.max_whitespace_run) return Step::Rejected;
  ++s.spaces;
  return Step::Taken;
}

bool Machine::fits(const Stack& s, uint32_t slot) const {
  return slot != kNone && (s.size - 1) + r_.slots[slot].min_depth <= r_.max_depth;
}

bool Machine::keys_open(const Stack& s) const { return fits(s, r_.nodes[s.top().node].additional); }

bool Machine::key_possible(const Stack& s) const {
  const Frame& f = s.top();
  const Node& n = r_.nodes[f.node];
  return keys_open(s) || (n.names != kNone && (r_.trie[n.names].below & ~f.bits) != 0);
}

void Machine::end_value(Stack& s) {
  --s.size;
  s.top().phase = kAfter;
}

// The nodes of `slot` that can begin with b and still end within max_depth;
// the first continues this stack, the others fork copies of it.
bool Machine::start_value(Stacks& st, int i, uint32_t slot, uint8_t b) const {
  Stack& s = st.stacks[i];
  uint32_t matches[kMaxStacks];
  int m = 0;
  for (uint32_t node : r_.slots[slot].nodes) {
    const Node& n = r_.nodes[node];
    if ((s.size - 1) + n.min_depth > r_.max_depth) continue;
    bool starts = false;
    switch (n.kind) {
      case NodeKind::Object: starts = b == '{'; break;
      case NodeKind::Array: starts = b == '['; break;
      case NodeKind::String: starts = b == '"'; break;
      case NodeKind::Number:
        starts = (b == '-' || is_digit(b)) &&
                 (!n.bounded || integer_possible(n, b == '-', b == '-' ? 0 : b - '0', b != '-', b == '0'));
        break;
      case NodeKind::Literal: starts = r_.child(n.values, b) != kNone; break;
    }
    if (starts) matches[m++] = node;
    if (m == kMaxStacks) break;
  }
  if (m == 0) return false;
  for (int k = 1; k < m && st.count < kMaxStacks; ++k) {
    Stack& fork = st.stacks[st.count++];
    fork.copy_from(s);
    open_value(fork, matches[k], b);
  }
  open_value(s, matches[0], b);
  return true;
}

// Pushes the frame of a value of `node` whose first byte is b.
void Machine::open_value(Stack& s, uint32_t node, uint8_t b) const {
  const Node& n = r_.nodes[node];
  Frame f{0, node, 0, kNone, 0, Kind::Root, 0};
  switch (n.kind) {
    case NodeKind::Object:
      f.kind = Kind::Object;
      f.phase = kOpen;
      for (size_t p = 0; p < n.property_slots.size(); ++p)  // values that would nest too deep: as if present
        if (s.size + r_.slots[n.property_slots[p]].min_depth > r_.max_depth) f.bits |= uint64_t(1) << p;
      break;
    case NodeKind::Array:
      f.kind = Kind::Array;
      f.phase = kOpen;
      break;
    case NodeKind::String:
      f.kind = n.values != kNone ? Kind::EnumString : Kind::String;
      f.trie = n.values;
      f.phase = kText;
      break;
    case NodeKind::Number:
      f.kind = Kind::Number;
      f.phase = b == '-' ? kMinus : b == '0' ? kZero : kInt;
      if (n.bounded) {
        f.unit = b == '-';
        f.bits = b == '-' ? 0 : uint64_t(b - '0');
      }
      break;
    case NodeKind::Literal:
      f.kind = Kind::Literal;
      f.trie = r_.child(n.values, b);
      break;
  }
  s.frames[s.size++] = f;
  if (f.kind == Kind::Literal && r_.trie[f.trie].value >= 0 && r_.trie[f.trie].edge_count == 0) end_value(s);
}

Machine::Step Machine::root(Stacks& st, int i, uint8_t b) const {
  Frame& f = st.stacks[i].top();
  if (is_space(b)) return space(st.stacks[i]);
  if (f.phase != kValue) return Step::Rejected;
  f.phase = kInValue;
  return start_value(st, i, f.node, b) ? Step::Taken : Step::Rejected;
}

Machine::Step Machine::object(Stacks& st, int i, uint8_t b) const {
  Stack& s = st.stacks[i];
  Frame& f = s.top();
  const Node& n = r_.nodes[f.node];
  if (is_space(b)) return space(s);
  auto close = [&] {
    if (n.required & ~f.bits) return Step::Rejected;  // a required property is missing
    end_value(s);
    return Step::Taken;
  };
  switch (f.phase) {
    case kOpen:
    case kComma:
      if (b == '}' && f.phase == kOpen) return close();
      if (b != '"' || !key_possible(s)) return Step::Rejected;
      {
        const Kind key = keys_open(s) ? Kind::Key : Kind::ClosedKey;
        f.phase = kKey;
        s.frames[s.size++] = Frame{0, f.node, 0, n.names, 0, key, kText};
      }
      return Step::Taken;
    case kColon:
      if (b != ':') return Step::Rejected;
      f.phase = kValue;
      return Step::Taken;
    case kValue:
      f.phase = kInValue;
      return start_value(st, i, f.count == kNone ? n.additional : n.property_slots[f.count], b) ? Step::Taken
                                                                                                : Step::Rejected;
    case kAfter:
      if (b == '}') return close();
      if (b != ',' || !key_possible(s)) return Step::Rejected;
      f.phase = kComma;
      return Step::Taken;
    default: return Step::Rejected;
  }
}

Machine::Step Machine::array(Stacks& st, int i, uint8_t b) const {
  Stack& s = st.stacks[i];
  Frame& f = s.top();
  const Node& n = r_.nodes[f.node];
  if (is_space(b)) return space(s);
  // The slot of item number `k`, kNone past the end.
  auto item = [&](uint32_t k) {
    if (k >= n.max_items) return kNone;
    return k < n.prefix_items.size() ? n.prefix_items[k] : n.items;
  };
  const bool closing = b == ']' && f.phase != kValue;
  if (closing) {
    if (f.count < n.min_items) return Step::Rejected;
    end_value(s);
    return Step::Taken;
  }
  if (f.phase == kAfter) {
    if (b != ',' || !fits(s, item(f.count))) return Step::Rejected;
    f.phase = kValue;
    return Step::Taken;
  }
  const uint32_t slot = item(f.count);  // kOpen or kValue: an item begins
  if (slot == kNone) return Step::Rejected;
  ++f.count;
  f.phase = kInValue;
  return start_value(st, i, slot, b) ? Step::Taken : Step::Rejected;
}

bool Machine::number_may_end(const Frame& f) const {
  if (f.phase != kZero && f.phase != kInt && f.phase != kFrac && f.phase != kExpDigits) return false;
  const Node& n = r_.nodes[f.node];
  if (!n.bounded) return true;
  const __int128 value = f.unit ? -__int128(f.bits) : __int128(f.bits);
  return value >= n.minimum && value <= n.maximum;
}

// Integers with bounds: the digits so far begin the values +-(magnitude x
// 10^j + r), 0 <= r < 10^j, for every j >= 0 (only j = 0 once `fixed`: a
// leading 0); "-" alone begins 0 (as -0) and every negative. Digits are taken
// only while one of those is in bounds, so the number can always be finished.
bool Machine::integer_possible(const Node& n, bool negative, uint64_t magnitude, bool any_digit, bool fixed) const {
  if (!any_digit) return n.minimum <= 0;
  __int128 scale = 1;
  for (int j = 0; j <= (fixed ? 0 : 19); ++j, scale *= 10) {  // 10^19 is past every bound
    const __int128 low = __int128(magnitude) * scale, high = low + scale - 1;
    if ((negative ? -high : low) <= n.maximum && (negative ? -low : high) >= n.minimum) return true;
  }
  return false;
}

Machine::Step Machine::number(Frame& f, uint8_t b) const {
  const Node& n = r_.nodes[f.node];
  const bool fraction_ok = !n.integer;
  const bool digit = is_digit(b);
  const bool exponent = fraction_ok && (b == 'e' || b == 'E');
  auto ended = [&] { return number_may_end(f) ? Step::Ended : Step::Rejected; };
  switch (f.phase) {
    case kMinus:
    case kZero:
    case kInt:
      if (digit) {
        if (f.phase == kZero) return Step::Rejected;  // no leading zeros
        const bool fixed = f.phase == kMinus && b == '0';
        if (n.bounded) {
          const uint64_t value = f.bits * 10 + uint64_t(b - '0');  // bits <= 2^53: no overflow
          if (!integer_possible(n, f.unit, value, true, fixed)) return Step::Rejected;
          f.bits = value;
        }
        f.phase = fixed ? kZero : kInt;
        return Step::Taken;
      }
      if (f.phase == kMinus) return Step::Rejected;
      if (fraction_ok && b == '.') {
        f.phase = kDot;
        return Step::Taken;
      }
      if (exponent) {
        f.phase = kExp;
        return Step::Taken;
      }
      return ended();
    case kDot:
      if (!digit) return Step::Rejected;
      f.phase = kFrac;
      return Step::Taken;
    case kFrac:
      if (digit) return Step::Taken;
      if (exponent) {
        f.phase = kExp;
        return Step::Taken;
      }
      return ended();
    case kExp:
      if (b == '+' || b == '-') {
        f.phase = kExpSign;
        return Step::Taken;
      }
      [[fallthrough]];
    case kExpSign:
      if (!digit) return Step::Rejected;
      f.phase = kExpDigits;
      return Step::Taken;
    default:  // kExpDigits
      return digit ? Step::Taken : ended();
  }
}

Machine::Step Machine::literal(Stack& s, uint8_t b) const {
  Frame& f = s.top();
  const uint32_t next = r_.child(f.trie, b);
  if (next == kNone) return r_.trie[f.trie].value >= 0 ? Step::Ended : Step::Rejected;
  f.trie = next;
  if (r_.trie[next].value >= 0 && r_.trie[next].edge_count == 0) end_value(s);  // nothing longer: done
  return Step::Taken;
}

}  // namespace json_rules

using json_rules::Machine;
using json_rules::Stacks;

JsonGrammar::JsonGrammar(std::shared_ptr<const json_rules::Rules> rules)
    : rules_(std::move(rules)), stacks_(new Stacks) {
  reset();
}

JsonGrammar JsonGrammar::any_object(const JsonGrammarOptions& options) {
  return JsonGrammar(json_rules::compile_any(true, options));
}

JsonGrammar JsonGrammar::any_value(const JsonGrammarOptions& options) {
  return JsonGrammar(json_rules::compile_any(false, options));
}

JsonGrammar JsonGrammar::from_schema(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options) {
  return JsonGrammar(json_rules::compile_schema(schema, options));
}

JsonGrammar::JsonGrammar(const JsonGrammar& other) : rules_(other.rules_), stacks_(new Stacks) {
  stacks_->copy_from(*other.stacks_);
}

JsonGrammar& JsonGrammar::operator=(const JsonGrammar& other) {
  if (this != &other) {
    rules_ = other.rules_;
    if (!stacks_) stacks_.reset(new Stacks);
    stacks_->copy_from(*other.stacks_);
  }
  return *this;
}

JsonGrammar::JsonGrammar(JsonGrammar&& other) noexcept = default;
JsonGrammar& JsonGrammar::operator=(JsonGrammar&& other) noexcept = default;
JsonGrammar::~JsonGrammar() = default;

void JsonGrammar::reset() { Machine(*rules_).start(*stacks_); }

bool JsonGrammar::accept(std::string_view bytes) {
  if (bytes.empty()) return true;
  Stacks scratch;
  scratch.copy_from(*stacks_);
  const Machine m(*rules_);
  for (char c : bytes)
    if (!m.feed(scratch, uint8_t(c))) return false;
  stacks_->copy_from(scratch);
  return true;
}

bool JsonGrammar::can_accept(std::string_view bytes) const {
  Stacks scratch;
  scratch.copy_from(*stacks_);
  const Machine m(*rules_);
  for (char c : bytes)
    if (!m.feed(scratch, uint8_t(c))) return false;
  return true;
}

// A walk over the strings in byte order that keeps the state after each
// prefix of the current string: the next string re-feeds only what it does not
// share, and a rejected prefix rejects every following string that has it
// without feeding anything.
void JsonGrammar::can_accept_sorted(std::span<const std::string_view> sorted, std::span<const uint16_t> shared,
                                    std::span<uint8_t> out) const {
  if (shared.size() != sorted.size() || out.size() != sorted.size())
    fail("json grammar", "can_accept_sorted: the spans differ in length");
  size_t longest = 0;
  for (std::string_view s : sorted) longest = std::max(longest, s.size());
  std::unique_ptr<Stacks[]> states(new Stacks[longest + 1]);  // states[k]: after k bytes of the current string
  states[0].copy_from(*stacks_);
  const Machine m(*rules_);
  size_t known = 0;                // states[0..known] hold for the previous string's prefixes
  size_t dead = SIZE_MAX;          // the previous string's prefix of this length is rejected
  for (size_t i = 0; i < sorted.size(); ++i) {
    const std::string_view s = sorted[i];
    const size_t common = i == 0 ? 0 : std::min<size_t>(shared[i], s.size());
    if (dead <= common) {  // shares a rejected prefix (known < dead stays true for this string)
      out[i] = 0;
      continue;
    }
    dead = SIZE_MAX;
    size_t k = std::min(known, common);
    bool ok = true;
    for (; k < s.size(); ++k) {
      states[k + 1].copy_from(states[k]);
      if (!m.feed(states[k + 1], uint8_t(s[k]))) {
        ok = false;
        dead = k + 1;
        break;
      }
    }
    known = k;
    out[i] = ok;
  }
}

size_t JsonGrammar::free_text_room() const {
  if (stacks_->count != 1) return 0;
  const json_rules::Frame& f = stacks_->stacks[0].top();
  if (f.phase != json_rules::kText) return 0;
  if (f.kind == json_rules::Kind::Key) return SIZE_MAX;  // an open object's key: any text (the trie only names it)
  if (f.kind != json_rules::Kind::String) return 0;
  const uint32_t max = rules_->nodes[f.node].max_length;
  return max == UINT32_MAX ? SIZE_MAX : max - f.count;
}

bool JsonGrammar::complete() const { return Machine(*rules_).complete(*stacks_); }

int JsonGrammar::readings() const { return stacks_->count; }

}  // namespace deltagen
