// An independent check of a parsed JSON value against a schema, for the
// tests and the fuzzer of runtime/json_grammar: a plain recursive validator
// of the same subset, with the same reading of it (a schema without "type"
// admits only the types its keywords are about; oneOf as anyOf; format not
// enforced). It shares no code with the automaton: a document the grammar
// completes must pass here.
#pragma once
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace deltagen::test {

class SchemaCheck {
 public:
  using Json = nlohmann::ordered_json;

  explicit SchemaCheck(const Json& root, bool closed_objects = false) : root_(root), closed_(closed_objects) {}

  bool valid(const Json& v) const { return valid(v, root_, 0); }

  // Nesting of objects and arrays (a scalar: 0).
  static int depth(const Json& v) {
    int d = 0;
    if (v.is_object() || v.is_array())
      for (const auto& item : v) d = std::max(d, depth(item));
    return v.is_object() || v.is_array() ? d + 1 : 0;
  }

 private:
  static size_t code_points(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }

  static bool has_any(const Json& s, std::initializer_list<const char*> keys) {
    for (const char* k : keys)
      if (s.contains(k)) return true;
    return false;
  }

  static bool type_ok(const Json& v, const std::string& t) {
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    return false;
  }

  bool valid(const Json& v, const Json& s, int hops) const {
    if (hops > 200) return false;  // a $ref loop without content
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"].get<std::string>();
      return valid(v, root_.at(Json::json_pointer(ref.substr(1))), hops + 1);
    }
    for (const char* k : {"anyOf", "oneOf"})
      if (s.contains(k)) {
        for (const Json& alt : s[k])
          if (valid(v, alt, hops + 1)) return true;
        return false;
      }
    if (s.contains("allOf")) {
      for (const Json& alt : s["allOf"])
        if (!valid(v, alt, hops + 1)) return false;
      return true;
    }
    if (s.contains("type")) {
      const Json& t = s["type"];
      bool ok = false;
      if (t.is_string()) ok = type_ok(v, t);
      for (const Json& name : t.is_array() ? t : Json::array()) ok = ok || type_ok(v, name);
      if (!ok) return false;
    } else if (!s.contains("enum") && !s.contains("const")) {  // keywords imply their types
      const bool o = has_any(s, {"properties", "required", "additionalProperties"});
      const bool a = has_any(s, {"items", "prefixItems", "additionalItems", "minItems", "maxItems"});
      const bool str = has_any(s, {"minLength", "maxLength"});
      const bool num = has_any(s, {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"});
      if ((o || a || str || num) &&
          !((o && v.is_object()) || (a && v.is_array()) || (str && v.is_string()) || (num && v.is_number())))
        return false;
    }
    if (s.contains("enum")) {
      bool found = false;
      for (const Json& e : s["enum"]) found = found || e == v;
      if (!found) return false;
    }
    if (s.contains("const") && s["const"] != v) return false;
    if (v.is_number()) {  // long double holds every int64 and double exactly
      const long double x = v.is_number_float() ? (long double)v.get<double>()
                            : v.is_number_unsigned() ? (long double)v.get<uint64_t>()
                                                     : (long double)v.get<int64_t>();
      auto bound = [&](const char* k) {
        const Json& b = s[k];
        return b.is_number_float() ? (long double)b.get<double>()
               : b.is_number_unsigned() ? (long double)b.get<uint64_t>()
                                        : (long double)b.get<int64_t>();
      };
      if (s.contains("minimum") && x < bound("minimum")) return false;
      if (s.contains("maximum") && x > bound("maximum")) return false;
      if (s.contains("exclusiveMinimum") && x <= bound("exclusiveMinimum")) return false;
      if (s.contains("exclusiveMaximum") && x >= bound("exclusiveMaximum")) return false;
    }
    if (v.is_string()) {
      if (s.contains("minLength") && code_points(v) < s["minLength"].get<size_t>()) return false;
      if (s.contains("maxLength") && code_points(v) > s["maxLength"].get<size_t>()) return false;
    }
    if (v.is_object()) return object_valid(v, s, hops);
    if (v.is_array()) return array_valid(v, s, hops);
    return true;
  }

  bool object_valid(const Json& v, const Json& s, int hops) const {
    const Json none = Json::object();
    const Json& properties = s.contains("properties") ? s["properties"] : none;
    for (const Json& name : s.contains("required") ? s["required"] : Json::array())
      if (!v.contains(name.get<std::string>())) return false;
    for (const auto& [key, value] : v.items()) {
      if (properties.contains(key)) {
        if (!valid(value, properties[key], hops + 1)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!valid(value, s["additionalProperties"], hops + 1)) return false;
      } else if (closed_) {
        return false;
      }
    }
    return true;
  }

  bool array_valid(const Json& v, const Json& s, int hops) const {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    Json prefix = Json::array(), rest = true;
    if (s.contains("prefixItems")) {
      prefix = s["prefixItems"];
      if (s.contains("items")) rest = s["items"];
    } else if (s.contains("items") && s["items"].is_array()) {
      prefix = s["items"];
      if (s.contains("additionalItems")) rest = s["additionalItems"];
    } else if (s.contains("items")) {
      rest = s["items"];
    }
    for (size_t i = 0; i < v.size(); ++i)
      if (!valid(v[i], i < prefix.size() ? prefix[i] : rest, hops + 1)) return false;
    return true;
  }

  const Json& root_;
  bool closed_;
};

}  // namespace deltagen::test
