// JSON Schema -> json_rules::Rules (see runtime/json_grammar.h for the subset;
// the steps that need only the rules are in json_rules.cpp).
//
// Every subschema becomes a Slot; its Nodes are the concrete kinds of value it
// admits. anyOf, allOf of one, a list of types and $ref first become "nested
// slots", flattened into node lists at the end, so that a $ref cycle (a
// recursive schema) is a cycle in the graph and never a recursion here: a
// $ref gets its slot at once and its target is compiled later from a work
// list. Then each node's least nesting depth is found by iterating to a fixed
// point; the automaton uses it to never start a value it could not finish.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "deltagen/error.h"
#include "runtime/json_grammar.h"
#include "runtime/json_rules.h"

namespace deltagen::json_rules {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxSubschemas = 4096;
constexpr int kMaxNesting = 100;
constexpr size_t kMaxTrieNodes = size_t(1) << 20;

// Keywords that do not change which values are valid.
bool is_annotation(std::string_view key) {
  static const char* const kNames[] = {"title",    "description", "default",        "examples",        "$schema",
                                       "$comment", "deprecated",  "readOnly",       "writeOnly",       "format",
                                       "$defs",    "definitions", "contentEncoding", "contentMediaType", "$id"};
  return std::find(std::begin(kNames), std::end(kNames), key) != std::end(kNames);
}

enum class Group { Any, Object, Array, String, Number };

// The keywords compiled here, and the type each one is about.
bool validity_keyword(std::string_view key, Group* group) {
  static const std::pair<const char*, Group> kNames[] = {
      {"type", Group::Any},           {"enum", Group::Any},          {"const", Group::Any},
      {"anyOf", Group::Any},          {"oneOf", Group::Any},         {"allOf", Group::Any},
      {"$ref", Group::Any},           {"properties", Group::Object}, {"required", Group::Object},
      {"additionalProperties", Group::Object}, {"items", Group::Array}, {"prefixItems", Group::Array},
      {"additionalItems", Group::Array}, {"minItems", Group::Array},  {"maxItems", Group::Array},
      {"minLength", Group::String},   {"maxLength", Group::String},  {"minimum", Group::Number},
      {"maximum", Group::Number},     {"exclusiveMinimum", Group::Number}, {"exclusiveMaximum", Group::Number}};
  for (const auto& [name, g] : kNames)
    if (key == name) {
      *group = g;
      return true;
    }
  return false;
}

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

Node node_of(NodeKind kind) {
  Node n;
  n.kind = kind;
  return n;
}

// A JSON pointer token: ~ and / escaped.
std::string pointer_token(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// Type bits.
enum : uint8_t { kObject = 1, kArray = 2, kString = 4, kNumber = 8, kInteger = 16, kBoolean = 32, kNull = 64 };
constexpr uint8_t kAllTypes = 127;

class Compiler {
 public:
  Compiler(const Json& root, const JsonGrammarOptions& options, Rules& rules)
      : root_(root), options_(options), r_(rules) {}

  uint32_t compile_root() {
    const uint32_t root = compile(root_, "", 0);
    while (!pending_.empty()) {
      const Pending p = pending_.back();
      pending_.pop_back();
      nest(p.slot, compile(*p.target, p.pointer, 0));
    }
    return root;
  }

  uint32_t any_slot() {
    if (any_slot_ != kNone) return any_slot_;
    any_slot_ = new_slot();
    Node object = node_of(NodeKind::Object);
    object.additional = any_slot_;
    Node array = node_of(NodeKind::Array);
    array.items = any_slot_;
    for (uint32_t n : {add_node(std::move(object)), add_node(std::move(array)), plain(NodeKind::String, false),
                       plain(NodeKind::Number, false), literals({"true", "false", "null"})})
      add_to(any_slot_, n);
    return any_slot_;
  }

  uint32_t any_object_slot() {
    const uint32_t slot = new_slot();
    Node object = node_of(NodeKind::Object);
    object.additional = any_slot();
    add_to(slot, add_node(std::move(object)));
    return slot;
  }

  // Node lists of every slot, then the least depths.
  void finish(uint32_t root) {
    r_.root = root;
    lay_out_slots(r_, raw_, options_.error_subject);
    least_depths(r_);
    if (r_.slots[root].min_depth > r_.max_depth)
      fail(options_.error_subject, "the schema admits no JSON value within a nesting depth of " +
                                       std::to_string(r_.max_depth));
  }

 private:
  struct Pending {
    const Json* target;
    std::string pointer;
    uint32_t slot;
  };

  [[noreturn]] void fail_at(const std::string& at, const std::string& problem) const {
    fail(options_.error_subject, at.empty() ? problem : problem + " (at #" + at + ")");
  }

  uint32_t new_slot() {
    raw_.emplace_back();
    return uint32_t(raw_.size() - 1);
  }
  // Both take the value first: computing it may grow raw_.
  void nest(uint32_t slot, uint32_t inner) { raw_[slot].slots.push_back(inner); }
  void add_to(uint32_t slot, uint32_t node) { raw_[slot].nodes.push_back(node); }
  uint32_t add_node(Node n) {
    r_.nodes.push_back(std::move(n));
    return uint32_t(r_.nodes.size() - 1);
  }
  uint32_t lay_out(const TrieBuilder& t, const std::string& at) {
    const uint32_t root = t.lay_out(r_);
    if (r_.trie.size() > kMaxTrieNodes) fail_at(at, "the schema is too large (its names and enum values)");
    return root;
  }

  // The shared nodes without constraints.
  uint32_t plain(NodeKind kind, bool integer) {
    uint32_t& cached = kind == NodeKind::String ? string_ : integer ? integer_ : number_;
    if (cached == kNone) {
      Node n = node_of(kind);
      n.integer = integer;
      cached = add_node(std::move(n));
    }
    return cached;
  }
  uint32_t literals(std::initializer_list<const char*> texts) {
    const std::string key = [&] {
      std::string k;
      for (const char* t : texts) k += std::string(t) + ",";
      return k;
    }();
    auto it = literal_nodes_.find(key);
    if (it != literal_nodes_.end()) return it->second;
    TrieBuilder trie;
    for (const char* t : texts) trie.add(t, 0, false);
    Node n = node_of(NodeKind::Literal);
    n.values = lay_out(trie, "");
    return literal_nodes_[key] = add_node(std::move(n));
  }

  uint32_t compile(const Json& s, const std::string& at, int nesting) {
    if (++subschemas_ > kMaxSubschemas)
      fail_at(at, "the schema is too large (more than " + std::to_string(kMaxSubschemas) + " subschemas)");
    if (nesting > kMaxNesting) fail_at(at, "the schema nests deeper than " + std::to_string(kMaxNesting) + " levels");
    const uint32_t slot = new_slot();
    if (s.is_boolean()) {
      if (s.get<bool>()) nest(slot, any_slot());
      return slot;
    }
    if (!s.is_object()) fail_at(at, "a schema must be an object or a boolean");
    uint8_t implied = 0;
    std::vector<std::string> validity;
    for (const auto& [key, value] : s.items()) {
      if (key == "$id" && !at.empty()) fail_at(at, "\"$id\" is only supported at the root");
      if (is_annotation(key)) continue;
      Group group;
      if (!validity_keyword(key, &group)) fail_at(at, in_quotes(key) + " is not supported");
      validity.push_back(key);
      implied |= group == Group::Object   ? kObject
                 : group == Group::Array  ? kArray
                 : group == Group::String ? kString
                 : group == Group::Number ? kNumber
                                          : 0;
    }
    // Applicators stand alone: a conjunction with other keywords is not compiled.
    auto alone = [&](const char* keyword, std::initializer_list<const char*> besides) {
      for (const std::string& k : validity)
        if (k != keyword && std::find(besides.begin(), besides.end(), k) == besides.end())
          fail_at(at, in_quotes(keyword) + " next to " + in_quotes(k) + " is not supported");
    };
    if (s.contains("$ref")) {
      alone("$ref", {});
      nest(slot, ref_slot(s["$ref"], at));
      return slot;
    }
    for (const char* keyword : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(keyword)) continue;
      alone(keyword, {});
      const Json& list = s[keyword];
      if (!list.is_array() || list.empty()) fail_at(at, in_quotes(keyword) + " must be a non-empty list of schemas");
      if (std::string_view(keyword) == "allOf" && list.size() != 1)
        fail_at(at, "\"allOf\" with more than one schema is not supported");
      for (size_t i = 0; i < list.size(); ++i)
        nest(slot, compile(list[i], at + "/" + keyword + "/" + std::to_string(i), nesting + 1));
      return slot;
    }
    const uint8_t types = s.contains("type") ? parse_types(s["type"], at) : implied ? implied : kAllTypes;
    if (s.contains("enum") || s.contains("const")) {
      alone(s.contains("enum") ? "enum" : "const", {"type"});
      if (s.contains("enum") && !s["enum"].is_array()) fail_at(at, "\"enum\" must be a list");
      const Json values = s.contains("enum") ? s["enum"] : Json::array({s["const"]});
      add_values(slot, values, types, at, nesting);
      return slot;
    }
    if (types & kObject) add_to(slot, object_node(s, at, nesting));
    if (types & kArray) add_to(slot, array_node(s, at, nesting));
    if (types & kString) add_to(slot, string_node(s, at));
    const bool bounds = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                        s.contains("exclusiveMaximum");
    if ((types & kNumber) && bounds)
      fail_at(at, "minimum / maximum are only supported for integers (\"type\": \"integer\")");
    if (types & kNumber) add_to(slot, plain(NodeKind::Number, false));
    if ((types & kInteger) && !(types & kNumber)) {
      const uint32_t node = bounds ? bounded_integer(s, at) : plain(NodeKind::Number, true);
      if (node != kNone) add_to(slot, node);
    }
    if (types & kBoolean) add_to(slot, literals({"true", "false"}));
    if (types & kNull) add_to(slot, literals({"null"}));
    return slot;
  }

  uint8_t parse_types(const Json& type, const std::string& at) const {
    auto one = [&](const Json& name) -> uint8_t {
      if (!name.is_string()) fail_at(at, "\"type\" must be a type name or a list of them");
      static const std::pair<const char*, uint8_t> kTypes[] = {{"object", kObject},   {"array", kArray},
                                                               {"string", kString},   {"number", kNumber},
                                                               {"integer", kInteger}, {"boolean", kBoolean},
                                                               {"null", kNull}};
      for (const auto& [n, bit] : kTypes)
        if (name.get<std::string>() == n) return bit;
      fail_at(at, "\"type\": unknown type " + in_quotes(name.get<std::string>()));
    };
    if (!type.is_array()) return one(type);
    if (type.empty()) fail_at(at, "\"type\" must be a type name or a list of them");
    uint8_t bits = 0;
    for (const Json& t : type) bits |= one(t);
    return bits;
  }

  uint32_t count(const Json& s, const char* keyword, const std::string& at) const {
    const Json& v = s[keyword];
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0))
      return uint32_t(std::min<uint64_t>(v.get<uint64_t>(), UINT32_MAX));
    if (v.is_number_float() && v.get<double>() >= 0 && std::floor(v.get<double>()) == v.get<double>())
      return uint32_t(std::min<double>(v.get<double>(), UINT32_MAX));
    fail_at(at, in_quotes(keyword) + " must be a non-negative integer");
  }

  uint32_t object_node(const Json& s, const std::string& at, int nesting) {
    Node n = node_of(NodeKind::Object);
    std::vector<std::string> names;
    auto add_property = [&](const std::string& name, uint32_t slot) {
      if (names.size() == size_t(kMaxProperties))
        fail_at(at, "more than " + std::to_string(kMaxProperties) + " properties in one object are not supported");
      names.push_back(name);
      n.property_slots.push_back(slot);
    };
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) fail_at(at, "\"properties\" must be an object");
      for (const auto& [name, sub] : s["properties"].items())
        add_property(name, compile(sub, at + "/properties/" + pointer_token(name), nesting + 1));
    }
    if (s.contains("additionalProperties")) {
      n.additional = compile(s["additionalProperties"], at + "/additionalProperties", nesting + 1);
    } else if (!options_.closed_objects) {
      n.additional = any_slot();
    }
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail_at(at, "\"required\" must be a list of names");
      for (const Json& name : s["required"]) {
        if (!name.is_string()) fail_at(at, "\"required\" must be a list of names");
        auto it = std::find(names.begin(), names.end(), name.get<std::string>());
        if (it == names.end()) {  // required but not described: any value other keys may have
          add_property(name, n.additional != kNone ? n.additional : new_slot());
          it = names.end() - 1;
        }
        n.required |= uint64_t(1) << (it - names.begin());
      }
    }
    if (!names.empty()) {
      TrieBuilder trie;
      for (size_t i = 0; i < names.size(); ++i) trie.add(names[i], int32_t(i), true);
      n.names = lay_out(trie, at);
    }
    return add_node(std::move(n));
  }

  uint32_t array_node(const Json& s, const std::string& at, int nesting) {
    Node n = node_of(NodeKind::Array);
    auto tuple = [&](const Json& list, const std::string& where) {
      if (!list.is_array()) fail_at(at, in_quotes(where) + " must be a list of schemas");
      for (size_t i = 0; i < list.size(); ++i)
        n.prefix_items.push_back(compile(list[i], at + "/" + where + "/" + std::to_string(i), nesting + 1));
    };
    auto rest = [&](const char* keyword) {
      return s.contains(keyword) ? compile(s[keyword], at + "/" + keyword, nesting + 1) : any_slot();
    };
    if (s.contains("prefixItems")) {
      tuple(s["prefixItems"], "prefixItems");
      n.items = rest("items");
    } else if (s.contains("items") && s["items"].is_array()) {  // draft 7 tuples
      tuple(s["items"], "items");
      n.items = rest("additionalItems");
    } else {
      n.items = rest("items");
    }
    if (s.contains("minItems")) n.min_items = count(s, "minItems", at);
    if (s.contains("maxItems")) n.max_items = count(s, "maxItems", at);
    return add_node(std::move(n));
  }

  // An integer within minimum / maximum (exclusive ones made inclusive);
  // kNone if no integer is. Bounds beyond +-2^53 (where JSON numbers stop
  // being exact in most parsers) are refused.
  uint32_t bounded_integer(const Json& s, const std::string& at) {
    Node n = node_of(NodeKind::Number);
    n.integer = n.bounded = true;
    constexpr double kLimit = 9007199254740992.0;  // 2^53
    auto bound = [&](const char* keyword, bool lower, bool exclusive) {
      const Json& v = s[keyword];
      if (!v.is_number() || std::abs(v.get<double>()) > kLimit)
        fail_at(at, in_quotes(keyword) + " must be a number within +-2^53");
      const double x = v.get<double>();
      const double b = lower ? (exclusive ? std::floor(x) + 1 : std::ceil(x)) : (exclusive ? std::ceil(x) - 1 : std::floor(x));
      int64_t& field = lower ? n.minimum : n.maximum;
      if (v.is_number_integer()) {  // exact, not through a double
        const int64_t i = v.is_number_unsigned() ? int64_t(v.get<uint64_t>()) : v.get<int64_t>();
        field = lower ? std::max(field, exclusive ? i + 1 : i) : std::min(field, exclusive ? i - 1 : i);
      } else {
        field = lower ? std::max(field, int64_t(b)) : std::min(field, int64_t(b));
      }
    };
    if (s.contains("minimum")) bound("minimum", true, false);
    if (s.contains("exclusiveMinimum")) bound("exclusiveMinimum", true, true);
    if (s.contains("maximum")) bound("maximum", false, false);
    if (s.contains("exclusiveMaximum")) bound("exclusiveMaximum", false, true);
    if (n.minimum > n.maximum) return kNone;
    return add_node(std::move(n));
  }

  uint32_t string_node(const Json& s, const std::string& at) {
    if (!s.contains("minLength") && !s.contains("maxLength")) return plain(NodeKind::String, false);
    Node n = node_of(NodeKind::String);
    if (s.contains("minLength")) n.min_length = count(s, "minLength", at);
    if (s.contains("maxLength")) n.max_length = count(s, "maxLength", at);
    return add_node(std::move(n));
  }

  static bool has_type(const Json& v, uint8_t types) {
    switch (v.type()) {
      case Json::value_t::object: return types & kObject;
      case Json::value_t::array: return types & kArray;
      case Json::value_t::string: return types & kString;
      case Json::value_t::boolean: return types & kBoolean;
      case Json::value_t::null: return types & kNull;
      case Json::value_t::number_float:
        if (types & kNumber) return true;
        return (types & kInteger) && std::floor(v.get<double>()) == v.get<double>();
      default: return types & (kNumber | kInteger);  // integers
    }
  }

  // enum / const: strings in one trie, other scalars' texts in another,
  // objects and arrays as nodes of their own (const all the way down).
  void add_values(uint32_t slot, const Json& values, uint8_t types, const std::string& at, int nesting) {
    TrieBuilder strings, texts;
    for (const Json& v : values) {
      if (!has_type(v, types)) continue;
      if (v.is_string()) {
        strings.add(v.get<std::string>(), 0, false);
      } else if (v.is_object() || v.is_array()) {
        add_to(slot, const_node(v, at, nesting + 1));
      } else {
        if (v.is_number_float() && !std::isfinite(v.get<double>())) fail_at(at, "a number in \"enum\" is not finite");
        texts.add(v.dump(), 0, false);
      }
    }
    if (!strings.empty()) {
      Node n = node_of(NodeKind::String);
      n.values = lay_out(strings, at);
      add_to(slot, add_node(std::move(n)));
    }
    if (!texts.empty()) {
      Node n = node_of(NodeKind::Literal);
      n.values = lay_out(texts, at);
      add_to(slot, add_node(std::move(n)));
    }
  }

  uint32_t const_slot(const Json& v, const std::string& at, int nesting) {
    if (++subschemas_ > kMaxSubschemas)
      fail_at(at, "the schema is too large (more than " + std::to_string(kMaxSubschemas) + " subschemas)");
    if (nesting > kMaxNesting) fail_at(at, "a constant nests deeper than " + std::to_string(kMaxNesting) + " levels");
    const uint32_t slot = new_slot();
    add_values(slot, Json::array({v}), kAllTypes, at, nesting);
    return slot;
  }

  uint32_t const_node(const Json& v, const std::string& at, int nesting) {
    if (v.is_array()) {
      Node n = node_of(NodeKind::Array);
      for (const Json& item : v) n.prefix_items.push_back(const_slot(item, at, nesting));
      n.min_items = n.max_items = uint32_t(v.size());
      return add_node(std::move(n));
    }
    Node n = node_of(NodeKind::Object);
    if (v.size() > size_t(kMaxProperties))
      fail_at(at, "more than " + std::to_string(kMaxProperties) + " properties in one object are not supported");
    TrieBuilder trie;
    int32_t i = 0;
    for (const auto& [name, value] : v.items()) {
      trie.add(name, i, true);
      n.property_slots.push_back(const_slot(value, at, nesting));
      n.required |= uint64_t(1) << i++;
    }
    if (i > 0) n.names = lay_out(trie, at);
    return add_node(std::move(n));
  }

  uint32_t ref_slot(const Json& ref, const std::string& at) {
    if (!ref.is_string()) fail_at(at, "\"$ref\" must be a string");
    const std::string text = ref.get<std::string>();
    if (text.empty() || text[0] != '#')
      fail_at(at, "\"$ref\" " + in_quotes(text) + " is not supported: only references into this schema (#/...)");
    std::string pointer;  // the fragment, %-decoded
    for (size_t i = 1; i < text.size(); ++i) {
      auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : -1; };
      if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
        pointer += char(hex(text[i + 1]) * 16 + hex(text[i + 2]));
        i += 2;
      } else {
        pointer += text[i];
      }
    }
    if (!pointer.empty() && pointer[0] != '/')
      fail_at(at, "\"$ref\" " + in_quotes(text) + " is not supported: anchors are not, JSON pointers (#/...) are");
    auto known = ref_slots_.find(pointer);
    if (known != ref_slots_.end()) return known->second;
    const Json* target = nullptr;
    try {
      const Json::json_pointer p(pointer);
      if (root_.contains(p)) target = &root_.at(p);
    } catch (const nlohmann::json::exception&) {
      fail_at(at, "\"$ref\" " + in_quotes(text) + " is not a valid JSON pointer");
    }
    if (!target) fail_at(at, "\"$ref\" " + in_quotes(text) + " points to nothing");
    const uint32_t slot = new_slot();
    ref_slots_[pointer] = slot;
    pending_.push_back({target, pointer, slot});
    return slot;
  }

  const Json& root_;
  const JsonGrammarOptions& options_;
  Rules& r_;
  std::vector<RawSlot> raw_;
  std::vector<Pending> pending_;
  std::map<std::string, uint32_t> ref_slots_;
  std::map<std::string, uint32_t> literal_nodes_;
  uint32_t any_slot_ = kNone, string_ = kNone, number_ = kNone, integer_ = kNone;
  int subschemas_ = 0;
};

std::shared_ptr<Rules> new_rules(const JsonGrammarOptions& options) {
  if (options.max_depth < 1 || options.max_depth > kMaxDepthLimit)
    fail("json grammar", "max_depth must be in [1, " + std::to_string(kMaxDepthLimit) + "]");
  if (options.max_whitespace_run < 0 || options.max_whitespace_run > 255)
    fail("json grammar", "max_whitespace_run must be in [0, 255]");
  auto rules = std::make_shared<Rules>();
  rules->max_depth = options.max_depth;
  rules->max_whitespace_run = options.max_whitespace_run;
  return rules;
}

}  // namespace

std::shared_ptr<const Rules> compile_schema(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options) {
  auto rules = new_rules(options);
  Compiler c(schema, options, *rules);
  c.finish(c.compile_root());
  return rules;
}

std::shared_ptr<const Rules> compile_any(bool object_only, const JsonGrammarOptions& options) {
  auto rules = new_rules(options);
  const nlohmann::ordered_json empty;
  Compiler c(empty, options, *rules);
  c.finish(object_only ? c.any_object_slot() : c.any_slot());
  return rules;
}

}  // namespace deltagen::json_rules
