// The automaton behind JsonGrammar (runtime/json_grammar.h): its state (a
// few stacks of frames) and the byte step over json_rules::Rules. Internal:
// json_grammar.cpp (containers, numbers, literals) and json_strings.cpp
// (strings, keys, escapes) implement it.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/json_rules.h"

namespace deltagen::json_rules {

enum class Kind : uint8_t {
  Root,
  Object,
  Array,
  String,      // any string (with min/max length)
  EnumString,  // one of the strings in a trie
  Key,         // an object key; other keys than the named ones are allowed
  ClosedKey,   // an object key that must be one of the named, unused ones
  Number,
  Literal,
};

// Phases of Root, Object and Array frames.
enum : uint8_t {
  kOpen,     // after { or [: whitespace, a key / value, or the close
  kKey,      // a key is being read (its frame is on top)
  kColon,    // after a key: whitespace, ':'
  kValue,    // a value must come: whitespace, its first byte
  kInValue,  // a value is being read (its frame is on top)
  kAfter,    // after a value: whitespace, ',' or the close (root: whitespace only)
  kComma,    // object, after ',': whitespace, a key
};

// Phases of Number frames.
enum : uint8_t { kMinus, kZero, kInt, kDot, kFrac, kExp, kExpSign, kExpDigits };

// Phases of string frames (String, EnumString, Key, ClosedKey).
enum : uint8_t {
  kText,
  kEscape,                                   // after a backslash
  kHex0, kHex1, kHex2, kHex3,                // \u and that many hex digits
  kLowBackslash, kLowU,                      // a high surrogate was read: \u and its low half must follow
  kLowHex0, kLowHex1, kLowHex2, kLowHex3,
  kTail1, kTail2, kTail3,                    // UTF-8: that many continuation bytes (80-BF) to come
  kTailE0, kTailED, kTailF0, kTailF4,        // the first continuation byte after E0, ED, F0, F4 (narrower ranges)
};

// 24 bytes, no padding: stacks are compared with memcmp.
struct Frame {
  uint64_t bits;   // Object: properties present or out of depth reach. Strings: a high surrogate awaiting its pair.
                   // A bounded integer: its digits' value
  uint32_t node;   // Root: the root slot; keys: the object's node; else the node
  uint32_t count;  // Object: the property whose value comes (kNone: another key). Array: items begun. String: code points
  uint32_t trie;   // EnumString, keys, Literal: position in the trie (open keys: kNone once off it)
  uint16_t unit;   // strings: the \u value read so far. A bounded integer: 1 if negative
  Kind kind;
  uint8_t phase;
};
static_assert(sizeof(Frame) == 24 && std::has_unique_object_representations_v<Frame>);

constexpr int kMaxStacks = 8;                       // readings alive at once; more alternatives are dropped
constexpr int kFrameCapacity = kMaxDepthLimit + 2;  // root + containers + one key / string / number / literal

struct Stack {
  uint8_t size;
  uint8_t spaces;  // structural whitespace bytes in a row
  Frame frames[kFrameCapacity];

  Frame& top() { return frames[size - 1]; }
  const Frame& top() const { return frames[size - 1]; }
  void copy_from(const Stack& o) {
    size = o.size;
    spaces = o.spaces;
    std::memcpy(frames, o.frames, sizeof(Frame) * o.size);
  }
  bool same_as(const Stack& o) const {
    return size == o.size && spaces == o.spaces && std::memcmp(frames, o.frames, sizeof(Frame) * size) == 0;
  }
};

// Deliberately left uninitialized on construction: only the live part
// (count stacks, size frames each) is ever read or copied.
struct Stacks {
  int count;
  Stack stacks[kMaxStacks];

  void copy_from(const Stacks& o) {
    count = o.count;
    for (int i = 0; i < o.count; ++i) stacks[i].copy_from(o.stacks[i]);
  }
};

class Machine {
 public:
  explicit Machine(const Rules& rules) : r_(rules) {}

  void start(Stacks& st) const;
  // Feeds one byte to every reading; false if none takes it (st is then unusable).
  bool feed(Stacks& st, uint8_t b) const;
  bool complete(const Stacks& st) const;

 private:
  enum class Step { Taken, Rejected, Ended };  // Ended: the top value ended before b; its parent takes b

  bool feed_stack(Stacks& st, int i, uint8_t b) const;
  Step root(Stacks& st, int i, uint8_t b) const;
  Step object(Stacks& st, int i, uint8_t b) const;
  Step array(Stacks& st, int i, uint8_t b) const;
  Step number(Frame& f, uint8_t b) const;
  Step literal(Stack& s, uint8_t b) const;
  Step string(Stack& s, uint8_t b) const;  // json_strings.cpp

  Step space(Stack& s) const;
  // Numbers: whether this one may end here (and is within an integer's
  // bounds); whether some integer that begins so is within them (json_grammar.cpp).
  bool number_may_end(const Frame& f) const;
  bool integer_possible(const Node& n, bool negative, uint64_t magnitude, bool any_digit, bool fixed) const;
  bool start_value(Stacks& st, int i, uint32_t slot, uint8_t b) const;
  void open_value(Stack& s, uint32_t node, uint8_t b) const;
  static void end_value(Stack& s);
  bool fits(const Stack& s, uint32_t slot) const;  // a value of `slot` can start on top of s
  bool keys_open(const Stack& s) const;           // the object on top of s admits other keys
  bool key_possible(const Stack& s) const;        // ... some key at all

  // json_strings.cpp
  Step close_string(Stack& s) const;
  bool to_trie(Stack& s, uint8_t byte) const;
  bool emit(Stack& s, uint32_t code_point) const;
  bool escape_possible(const Stack& s, uint32_t unit, int digits, bool low) const;

  const Rules& r_;
};

}  // namespace deltagen::json_rules
