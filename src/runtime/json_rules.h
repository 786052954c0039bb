// The compiled form of a JsonGrammar (runtime/json_grammar.h), shared by the
// schema compiler (json_schema.cpp) and the automaton (json_grammar.cpp).
//
// A schema becomes a graph of Slots and Nodes. A Slot is one place where a
// value goes (the root, a property, the items of an array) and lists the
// Nodes that may fill it: anyOf, a list of types and $ref are all resolved
// into these lists at compile time, so the automaton never sees them. A Node
// is one concrete kind of value with its constraints. Names, enum strings and
// literal texts live in prefix trees in one shared pool.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace deltagen {
struct JsonGrammarOptions;
}

namespace deltagen::json_rules {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr int kMaxDepthLimit = 64;      // JsonGrammarOptions::max_depth at most
constexpr int kMaxProperties = 64;      // per object schema: one bit each in a frame
constexpr uint8_t kUnreachable = 255;   // min_depth of a schema no finite value matches

enum class NodeKind : uint8_t {
  Object,
  Array,
  String,  // `values` set: one of these strings (enum / const)
  Number,
  Literal,  // one of the texts in `values`: true, false, null, enum numbers
};

struct Node {
  NodeKind kind = NodeKind::Literal;
  // The least nesting of objects and arrays a value of this node needs
  // (0 for scalars); kUnreachable if no finite value matches.
  uint8_t min_depth = kUnreachable;
  // Object
  uint32_t names = kNone;                // trie of property names; value = property index
  std::vector<uint32_t> property_slots;  // per property index
  uint64_t required = 0;                 // bit per property index
  uint32_t additional = kNone;           // slot of any other key's value; kNone = no other keys
  // Array
  std::vector<uint32_t> prefix_items;  // slots of the first items
  uint32_t items = kNone;              // slot of the items after those; kNone = no more
  uint32_t min_items = 0;
  uint32_t max_items = std::numeric_limits<uint32_t>::max();
  // String (lengths in code points)
  uint32_t min_length = 0;
  uint32_t max_length = std::numeric_limits<uint32_t>::max();
  // String: trie of the allowed values (decoded UTF-8), kNone = any string.
  // Literal: trie of the allowed texts, as written.
  uint32_t values = kNone;
  // Number
  bool integer = false;  // no fraction, no exponent
  bool bounded = false;  // integers only: within [minimum, maximum]
  int64_t minimum = std::numeric_limits<int64_t>::min();
  int64_t maximum = std::numeric_limits<int64_t>::max();
};

struct Slot {
  std::vector<uint32_t> nodes;  // in schema order, no duplicates
  uint8_t min_depth = kUnreachable;
};

// One trie node: edges [first_edge, first_edge + edge_count) sorted by byte.
struct TrieNode {
  uint32_t first_edge = 0;
  uint32_t edge_count = 0;
  int32_t value = -1;    // >= 0: a string ends here (its property index, or 0)
  uint64_t below = 0;    // name tries: bit per property ending here or below
};

struct TrieEdge {
  uint8_t byte = 0;
  uint32_t child = 0;
};

struct Rules {
  std::vector<Node> nodes;
  std::vector<Slot> slots;
  std::vector<TrieNode> trie;
  std::vector<TrieEdge> edges;
  uint32_t root = 0;  // slot
  int max_depth = 32;
  int max_whitespace_run = 48;

  // The child of trie node `t` along `byte`, or kNone.
  uint32_t child(uint32_t t, uint8_t byte) const {
    const TrieNode& n = trie[t];
    uint32_t lo = n.first_edge, hi = n.first_edge + n.edge_count;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (edges[mid].byte < byte) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo < n.first_edge + n.edge_count && edges[lo].byte == byte ? edges[lo].child : kNone;
  }
};

// Prefix trees are built in maps, then laid out in the rules' pool
// (json_rules.cpp). `mark_below`: name tries, where a node's `below` has the
// bit of every value (property index) ending there or beneath.
class TrieBuilder {
 public:
  void add(std::string_view s, int32_t value, bool mark_below);
  bool empty() const { return nodes_.size() == 1 && nodes_[0].value < 0; }
  uint32_t lay_out(Rules& r) const;  // the root's index in r.trie

 private:
  struct N {
    std::map<uint8_t, uint32_t> next;
    int32_t value = -1;
    uint64_t below = 0;
  };
  std::vector<N> nodes_{1};
};

// A slot as the compiler first sees it: its own nodes, and nested slots
// (anyOf alternatives, $ref targets, type lists) whose nodes are its too.
struct RawSlot {
  std::vector<uint32_t> nodes;
  std::vector<uint32_t> slots;
};

constexpr int kMaxAlternatives = 128;  // nodes per slot: each value start tests them all

// json_rules.cpp: the node list of every slot (nested ones flattened, cycles
// and repeats dropped, "integer" folded into "number" where both are), then
// every node's and slot's min_depth. Throws Error (subject: ...) for a slot
// of more than kMaxAlternatives nodes.
void lay_out_slots(Rules& r, const std::vector<RawSlot>& raw, const std::string& error_subject);
void least_depths(Rules& r);

// json_schema.cpp. Both throw Error (options.error_subject: ...).
std::shared_ptr<const Rules> compile_schema(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options);
std::shared_ptr<const Rules> compile_any(bool object_only, const JsonGrammarOptions& options);

}  // namespace deltagen::json_rules
