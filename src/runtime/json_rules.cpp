// The parts of compiling a JsonGrammar that work on the rules alone
// (runtime/json_rules.h): laying out tries, flattening slots, least depths.
#include "runtime/json_rules.h"

#include <algorithm>

#include "deltagen/error.h"

namespace deltagen::json_rules {

void TrieBuilder::add(std::string_view s, int32_t value, bool mark_below) {
  uint32_t n = 0;
  if (mark_below) nodes_[0].below |= uint64_t(1) << value;
  for (unsigned char c : s) {
    auto [it, fresh] = nodes_[n].next.try_emplace(c, uint32_t(nodes_.size()));
    if (fresh) nodes_.emplace_back();
    n = it->second;
    if (mark_below) nodes_[n].below |= uint64_t(1) << value;
  }
  nodes_[n].value = value;
}

uint32_t TrieBuilder::lay_out(Rules& r) const {
  const auto base = uint32_t(r.trie.size());
  for (const N& n : nodes_) {
    TrieNode t;
    t.first_edge = uint32_t(r.edges.size());
    t.edge_count = uint32_t(n.next.size());
    t.value = n.value;
    t.below = n.below;
    r.trie.push_back(t);
    for (const auto& [byte, child] : n.next) r.edges.push_back({byte, base + child});
  }
  return base;
}

void lay_out_slots(Rules& r, const std::vector<RawSlot>& raw, const std::string& error_subject) {
  r.slots.resize(raw.size());
  std::vector<uint32_t> seen(raw.size(), 0), taken(r.nodes.size(), 0);  // marks of this round
  uint32_t round = 0;
  for (uint32_t s = 0; s < raw.size(); ++s) {
    ++round;
    std::vector<uint32_t> todo = {s}, nodes;
    seen[s] = round;
    while (!todo.empty()) {  // depth first, alternatives in schema order
      const uint32_t t = todo.back();
      todo.pop_back();
      for (uint32_t n : raw[t].nodes)
        if (taken[n] != round) {
          taken[n] = round;
          nodes.push_back(n);
        }
      if (nodes.size() > size_t(kMaxAlternatives))
        fail(error_subject, "a value with more than " + std::to_string(kMaxAlternatives) +
                                " alternatives (anyOf, type lists, $refs together) is not supported");
      for (auto it = raw[t].slots.rbegin(); it != raw[t].slots.rend(); ++it)
        if (seen[*it] != round) {
          seen[*it] = round;
          todo.push_back(*it);
        }
    }
    // "number" covers "integer": keep one reading of a number, not two.
    const bool any_number = std::any_of(nodes.begin(), nodes.end(), [&](uint32_t n) {
      return r.nodes[n].kind == NodeKind::Number && !r.nodes[n].integer;
    });
    if (any_number)
      std::erase_if(nodes, [&](uint32_t n) { return r.nodes[n].kind == NodeKind::Number && r.nodes[n].integer; });
    r.slots[s].nodes = std::move(nodes);
  }
}

// min_depth of every node and slot: the least fixed point of
//   object = 1 + max over required properties, array = 1 + max over the
//   first min_items items, scalar = 0, slot = min over its nodes.
void least_depths(Rules& r) {
  auto plus_one = [](uint8_t d) { return d >= kUnreachable - 1 ? kUnreachable : uint8_t(d + 1); };
  for (bool changed = true; changed;) {
    changed = false;
    for (Node& n : r.nodes) {
      uint8_t d = 0;
      if (n.kind == NodeKind::Object) {
        for (size_t p = 0; p < n.property_slots.size(); ++p)
          if (n.required >> p & 1) d = std::max(d, r.slots[n.property_slots[p]].min_depth);
        d = plus_one(d);
      } else if (n.kind == NodeKind::Array) {
        for (size_t i = 0; i < n.prefix_items.size() && i < n.min_items; ++i)
          d = std::max(d, r.slots[n.prefix_items[i]].min_depth);
        if (n.min_items > n.prefix_items.size())
          d = std::max(d, n.items == kNone ? kUnreachable : r.slots[n.items].min_depth);
        if (n.min_items > n.max_items) d = kUnreachable;
        d = plus_one(d);
      }
      if (d < n.min_depth) {
        n.min_depth = d;
        changed = true;
      }
    }
    for (Slot& s : r.slots) {
      uint8_t d = kUnreachable;
      for (uint32_t n : s.nodes) d = std::min(d, r.nodes[n].min_depth);
      if (d < s.min_depth) {
        s.min_depth = d;
        changed = true;
      }
    }
  }
}

}  // namespace deltagen::json_rules
