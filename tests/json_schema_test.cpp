// runtime/json_grammar with a JSON Schema: each supported keyword admits what
// it should and refuses the rest at the right byte; unsupported or
// unsatisfiable schemas are one-line Errors naming the keyword and place; and
// random walks that pick any allowed byte never get stuck and always end in a
// document that nlohmann parses and an independent validator accepts.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deltagen/error.h"
#include "json_grammar_probe.h"
#include "json_schema_check.h"
#include "runtime/json_grammar.h"

namespace deltagen {
namespace {

using Json = nlohmann::ordered_json;
using test::refused_at;

JsonGrammar grammar(const char* schema, JsonGrammarOptions o = {}) { return JsonGrammar::from_schema(Json::parse(schema), o); }

bool whole(JsonGrammar g, std::string_view text) { return g.accept(text) && g.complete(); }

const char* kPerson = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "ignored", "format": "ignored too"},
    "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
  },
  "required": ["name"],
  "additionalProperties": false
})";

TEST(JsonSchemaGrammar, ObjectPropertiesRequiredAndClosed) {
  const auto g = grammar(kPerson);
  for (const char* ok : {R"({"name":"Ann"})", R"({"age": 30, "name": "Bob", "tags": ["a", "b"]})",
                         "{\n  \"name\": \"C\",\n  \"tags\": []\n}", R"({"na\u006de":"escaped key"})"})
    EXPECT_TRUE(whole(g, ok)) << ok;
  EXPECT_EQ(refused_at(g, R"({"age":30})"), 9u);              // "name" missing at the closing brace
  EXPECT_EQ(refused_at(g, R"({"name":"x","age":"30"})"), 18u);  // a string for an integer
  EXPECT_EQ(refused_at(g, R"({"name":"x","age":30.5})"), 20u);
  EXPECT_EQ(refused_at(g, R"({"name":"x","age":1,"x":1})"), 21u);  // no such key: refused at its first letter
  EXPECT_EQ(refused_at(g, R"({"name":"x","nick":1})"), 13u);  // "n...": only "name" starts so, and it is present
  EXPECT_EQ(refused_at(g, R"({"name":"x","name":"y"})"), 13u);
  EXPECT_EQ(refused_at(g, R"({"name":"x","tags":["a","b","c"]})"), 27u);  // maxItems at the comma
  EXPECT_EQ(refused_at(g, R"({"tags":[1]})"), 9u);
  // With every property present, no further key can start.
  auto full = g;
  ASSERT_TRUE(full.accept(R"({"name":"x","age":1,"tags":[])"));
  EXPECT_FALSE(full.can_accept(","));
  EXPECT_TRUE(full.can_accept("}"));
}

TEST(JsonSchemaGrammar, OtherPropertiesFollowAdditionalProperties) {
  const auto open = grammar(R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  EXPECT_TRUE(whole(open, R"({"a":1,"b":[{"c":null}],"c":"x"})"));
  EXPECT_EQ(refused_at(open, R"({"a":1,"a":2})"), 9u);  // a named property appears once: refused at the quote
  EXPECT_TRUE(whole(open, R"({"ab":"x","a":2})"));        // a longer key is another key
  const auto typed = grammar(R"({"properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"number"}})");
  EXPECT_TRUE(whole(typed, R"({"x":1.5,"a":2})"));
  EXPECT_EQ(refused_at(typed, R"({"x":"s"})"), 5u);
  JsonGrammarOptions closed;
  closed.closed_objects = true;
  EXPECT_EQ(refused_at(grammar(R"({"properties":{"a":{}}})", closed), R"({"b":1})"), 2u);
  // A required name the properties do not describe takes the additional schema.
  const auto required_only = grammar(R"({"required":["x"]})");
  EXPECT_EQ(refused_at(required_only, "{}"), 1u);
  EXPECT_TRUE(whole(required_only, R"({"x":[1,{}]})"));
  EXPECT_EQ(refused_at(required_only, "[]"), 0u);  // "required" implies an object
  // A property whose schema is false may not appear.
  EXPECT_EQ(refused_at(grammar(R"({"properties":{"a":false}})"), R"({"a":1})"), 3u);
}

TEST(JsonSchemaGrammar, EnumAndConst) {
  const auto e = grammar(R"({"enum":["red","green","blue",42,null,true,"a\"b"]})");
  for (const char* ok : {R"("red")", R"("green")", "42", "null", "true", R"("r\u0065d")", R"("a\"b")", R"("a\u0022b")"})
    EXPECT_TRUE(whole(e, ok)) << ok;
  EXPECT_EQ(refused_at(e, R"("yellow")"), 1u);
  EXPECT_EQ(refused_at(e, "43"), 1u);
  EXPECT_EQ(refused_at(e, R"("r\u0066")"), 7u);  // \u006 can still be 'e'; \u0066 cannot
  EXPECT_EQ(refused_at(e, R"("r\n")"), 3u);
  EXPECT_FALSE(whole(e, "4"));
  EXPECT_FALSE(whole(e, R"("gree")"));
  const auto c = grammar(R"({"const":{"a":[1,"x"],"b":{}}})");
  EXPECT_TRUE(whole(c, R"({ "b" : {}, "a" : [ 1 , "x" ] })"));
  EXPECT_EQ(refused_at(c, R"({"a":[1]})"), 7u);
  EXPECT_EQ(refused_at(c, R"({"a":[1,"x"],"b":{},"c":1})"), 19u);  // no key is left
  // "type" filters the values.
  EXPECT_EQ(refused_at(grammar(R"({"type":"string","enum":["a",1]})"), "1"), 0u);
  EXPECT_TRUE(whole(grammar(R"({"type":"integer","enum":[1.0, 2.5]})"), "1.0"));
}

TEST(JsonSchemaGrammar, AnyOfKeepsEveryAlternativeThatFits) {
  const auto g = grammar(R"({"anyOf":[
    {"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"],"additionalProperties":false},
    {"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number"}},"required":["kind","side"],"additionalProperties":false},
    {"type":["string","null"],"maxLength":3}]})");
  EXPECT_TRUE(whole(g, R"({"kind":"circle","r":1})"));
  EXPECT_TRUE(whole(g, R"({"side":2,"kind":"square"})"));
  EXPECT_TRUE(whole(g, R"("abc")"));
  EXPECT_TRUE(whole(g, "null"));
  EXPECT_EQ(refused_at(g, R"("abcd")"), 4u);
  EXPECT_EQ(refused_at(g, R"({"kind":"circle","side":2})"), 18u);
  auto two = g;
  ASSERT_TRUE(two.accept("{"));
  EXPECT_EQ(two.readings(), 2);
  ASSERT_TRUE(two.accept(R"("kind":"s)"));
  EXPECT_EQ(two.readings(), 1);
  // oneOf is read as anyOf; allOf of one schema is that schema.
  EXPECT_TRUE(whole(grammar(R"({"oneOf":[{"type":"integer"},{"type":"boolean"}]})"), "false"));
  EXPECT_TRUE(whole(grammar(R"({"allOf":[{"type":"integer"}],"description":"d"})"), "7"));
  // Readings that meet again are merged.
  auto same = grammar(R"({"anyOf":[{"type":"string"},{"type":"string","minLength":1}]})");
  ASSERT_TRUE(same.accept("\"a"));
  EXPECT_EQ(same.readings(), 2);
  ASSERT_TRUE(same.accept("\""));
  EXPECT_EQ(same.readings(), 1);
}

TEST(JsonSchemaGrammar, ArraysTuplesAndCounts) {
  const auto t = grammar(R"({"prefixItems":[{"type":"integer"},{"type":"string"}],"items":false,"minItems":1})");
  EXPECT_TRUE(whole(t, "[1]"));
  EXPECT_TRUE(whole(t, R"([1,"a"])"));
  EXPECT_EQ(refused_at(t, "[]"), 1u);
  EXPECT_EQ(refused_at(t, R"([1,"a",2])"), 6u);
  EXPECT_EQ(refused_at(t, R"(["a"])"), 1u);
  const auto draft7 = grammar(R"({"type":"array","items":[{"type":"null"}],"additionalItems":{"type":"boolean"}})");
  EXPECT_TRUE(whole(draft7, "[null,true,false]"));
  EXPECT_EQ(refused_at(draft7, "[null,null]"), 6u);
  const auto counted = grammar(R"({"type":"array","minItems":2,"maxItems":3})");
  EXPECT_EQ(refused_at(counted, "[1]"), 2u);
  EXPECT_TRUE(whole(counted, R"([1,"x",{}])"));
  EXPECT_EQ(refused_at(counted, "[1,2,3,4]"), 6u);
}

TEST(JsonSchemaGrammar, StringsNumbersAndTypeLists) {
  const auto len = grammar(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_EQ(refused_at(len, "\"\xc3\xa9\""), 3u);         // one code point (two bytes) is too short
  EXPECT_TRUE(whole(len, R"("\ud83d\ude00x")"));         // a surrogate pair is one code point
  EXPECT_TRUE(whole(len, "\"\xc3\xa9\xc3\xa9\xc3\xa9\""));
  EXPECT_EQ(refused_at(len, R"("abcd")"), 4u);
  EXPECT_EQ(refused_at(len, R"("abc\n")"), 4u);
  const auto integer = grammar(R"({"type":"integer"})");
  for (const char* ok : {"0", "-0", "12", "-999999999999999999999"}) EXPECT_TRUE(whole(integer, ok)) << ok;
  EXPECT_EQ(refused_at(integer, "1.0"), 1u);
  EXPECT_EQ(refused_at(integer, "1e2"), 1u);
  const auto list = grammar(R"({"type":["boolean","null","number"]})");
  for (const char* ok : {"true", "null", "1.5"}) EXPECT_TRUE(whole(list, ok)) << ok;
  EXPECT_EQ(refused_at(list, R"("s")"), 0u);
  EXPECT_TRUE(whole(grammar("true"), R"({"any":["thing"]})"));
  EXPECT_TRUE(whole(grammar("{}"), "[]"));
}

TEST(JsonSchemaGrammar, IntegerBounds) {
  const auto age = grammar(R"({"type":"integer","minimum":0,"maximum":120})");
  for (const char* ok : {"0", "7", "42", "120", "-0"}) EXPECT_TRUE(whole(age, ok)) << ok;
  EXPECT_EQ(refused_at(age, "121"), 2u);   // 12 may still be 12, 120; 121 cannot
  EXPECT_EQ(refused_at(age, "1200"), 3u);
  EXPECT_EQ(refused_at(age, "-1"), 1u);    // "-" may still be -0
  EXPECT_EQ(refused_at(age, "00"), 1u);
  EXPECT_EQ(refused_at(age, "[130]"), 0u);
  auto twelve = age;
  ASSERT_TRUE(twelve.accept("12"));
  EXPECT_TRUE(twelve.complete());
  EXPECT_TRUE(twelve.can_accept("0"));
  EXPECT_FALSE(twelve.can_accept("1"));
  // Exclusive bounds, negative ranges, and a number that may not end where it stands.
  const auto range = grammar(R"({"type":"array","items":{"type":"integer","exclusiveMinimum":-20,"exclusiveMaximum":-5}})");
  EXPECT_TRUE(whole(range, "[-19,-6,-10]"));
  EXPECT_EQ(refused_at(range, "[-20]"), 2u);  // -2, -2x: none in [-19, -6]
  EXPECT_EQ(refused_at(range, "[-5]"), 2u);
  EXPECT_EQ(refused_at(range, "[-1]"), 3u);  // -1 may become -10..-19, but may not end as -1
  EXPECT_EQ(refused_at(range, "[5]"), 1u);
  const auto big = grammar(R"({"type":"integer","minimum":1000})");
  EXPECT_EQ(refused_at(big, "999 "), 3u);  // 999 may become 9990, but may not end
  EXPECT_FALSE(whole(big, "999"));
  EXPECT_TRUE(whole(big, "9990"));
  EXPECT_EQ(refused_at(big, "0"), 0u);
  EXPECT_EQ(refused_at(big, "-"), 0u);
  EXPECT_TRUE(whole(grammar(R"({"type":["integer","null"],"minimum":2.5,"maximum":3.5})"), "3"));
  EXPECT_EQ(refused_at(grammar(R"({"type":["integer","null"],"minimum":2.5,"maximum":3.5})"), "2"), 0u);
  EXPECT_TRUE(whole(grammar(R"({"type":["integer","null"],"minimum":5,"maximum":4})"), "null"));
}

const char* kTree = R"({
  "$defs": {"node": {"type": "object", "additionalProperties": false, "required": ["value"],
    "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
  "$ref": "#/$defs/node"})";

TEST(JsonSchemaGrammar, RecursiveRefsAndTheirDepthBound) {
  JsonGrammarOptions o;
  o.max_depth = 5;
  const auto g = grammar(kTree, o);
  EXPECT_TRUE(whole(g, R"({"value":1,"children":[{"value":2,"children":[{"value":3}]}]})"));
  // Depth 5 = object, array, object, array, object: the innermost object may not open "children".
  auto deep = g;
  ASSERT_TRUE(deep.accept(R"({"value":1,"children":[{"value":2,"children":[{"value":3)"));
  EXPECT_FALSE(deep.can_accept(","));  // "children" would not fit, and no other key is allowed
  EXPECT_TRUE(deep.can_accept("}"));
  EXPECT_TRUE(whole(deep, "}]}]}"));
  // draft-7 definitions, a pointer with escapes, and a ref cycle through anyOf.
  EXPECT_TRUE(whole(grammar(R"({"definitions":{"a/b":{"type":"null"}},"$ref":"#/definitions/a~1b"})"), "null"));
  const auto cycle = grammar(R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})");
  EXPECT_TRUE(whole(cycle, "null"));
  EXPECT_EQ(refused_at(cycle, "1"), 0u);
  const auto list = grammar(R"({"type":"array","items":{"$ref":"#"}})");
  EXPECT_TRUE(whole(list, "[[],[[]]]"));
}

// What the Error says, or "" if none.
std::string error_of(const std::string& schema, JsonGrammarOptions o = {}) {
  try {
    JsonGrammar::from_schema(Json::parse(schema), o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchemaGrammar, UnsupportedOrImpossibleSchemasAreOneLineErrors) {
  std::string many = R"({"properties":{)";
  for (int i = 0; i < 65; ++i) many += (i ? "," : "") + std::string("\"p") + std::to_string(i) + "\":{}";
  many += "}}";
  std::string deep, deep_end;
  for (int i = 0; i < 150; ++i) deep += R"({"items":)", deep_end += "}";
  std::string wide = R"({"anyOf":[)", alternatives = R"({"anyOf":[)";
  for (int i = 0; i < 5000; ++i) wide += (i ? "," : "") + std::string("{}");
  for (int i = 0; i < 200; ++i)
    alternatives += (i ? "," : "") + std::string(R"({"type":"object","required":["k)") + std::to_string(i) + "\"]}";
  wide += "]}";
  alternatives += "]}";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"type":"string","pattern":"^a"})", R"("pattern" is not supported)"},
      {R"({"properties":{"tags":{"patternProperties":{}}}})", R"("patternProperties" is not supported (at #/properties/tags))"},
      {R"({"type":"number","minimum":0})", R"(minimum / maximum are only supported for integers ("type": "integer"))"},
      {R"({"minimum":0})", "only supported for integers"},
      {R"({"type":"integer","maximum":1e300})", R"("maximum" must be a number within +-2^53)"},
      {R"({"type":"integer","minimum":"0"})", R"("minimum" must be a number)"},
      {R"({"type":"integer","minimum":3,"maximum":2})", "admits no JSON value"},
      {R"({"type":"integer","multipleOf":2})", R"("multipleOf" is not supported)"},
      {R"({"type":"date"})", R"("type": unknown type "date")"},
      {R"({"type":[]})", R"("type" must be a type name or a list of them)"},
      {R"({"$ref":"http://x.org/s"})", "only references into this schema"},
      {R"({"$ref":"#/$defs/missing"})", R"("$ref" "#/$defs/missing" points to nothing)"},
      {R"({"$ref":"#node"})", "anchors are not"},
      {R"({"anyOf":[{"type":"string"}],"type":"string"})", R"("anyOf" next to "type" is not supported)"},
      {R"({"$ref":"#","minItems":1})", R"("$ref" next to "minItems" is not supported)"},
      {R"({"enum":[1],"maxLength":2})", R"("enum" next to "maxLength" is not supported)"},
      {R"({"allOf":[{},{}]})", R"("allOf" with more than one schema is not supported)"},
      {R"({"anyOf":[]})", R"("anyOf" must be a non-empty list of schemas)"},
      {R"({"items":{"minItems":-1}})", R"("minItems" must be a non-negative integer (at #/items))"},
      {R"({"enum":"x"})", R"("enum" must be a list)"},
      {"5", "a schema must be an object or a boolean"},
      {R"({"properties":{"a":{"$id":"x"}}})", R"("$id" is only supported at the root (at #/properties/a))"},
      {many, "more than 64 properties in one object are not supported"},
      {deep + "{}" + deep_end, "the schema nests deeper than 100 levels"},
      {wide, "the schema is too large"},
      {alternatives, "a value with more than 128 alternatives (anyOf, type lists, $refs together) is not supported"},
      {R"({"enum":[]})", "the schema admits no JSON value within a nesting depth of 32"},
      {"false", "admits no JSON value"},
      {R"({"type":"object","properties":{"c":{"$ref":"#"}},"required":["c"]})", "admits no JSON value"},
      {R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})", "admits no JSON value"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "admits no JSON value"},
      {R"({"required":["x"],"additionalProperties":false})", "admits no JSON value"},
  };
  for (const auto& [schema, expected] : cases) {
    const std::string message = error_of(schema);
    EXPECT_EQ(message.rfind("response_format.json_schema: ", 0), 0u) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << "got: " << message << "\nwanted: " << expected;
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
  JsonGrammarOptions o;
  o.max_depth = 2;
  o.error_subject = "tool f";
  EXPECT_EQ(error_of(R"({"type":"array","minItems":1,"items":{"type":"array","minItems":1,"items":{"type":"array"}}})", o),
            "tool f: the schema admits no JSON value within a nesting depth of 2");
}

// A walk that feeds random allowed bytes (late on, preferring ones that
// close things) must never find no byte allowed before the document is
// complete, and must end in a document that is valid JSON, of the schema.
// (Objects whose required keys the walk must find by chance are closed: in
// an open one it would add other keys forever.)
void random_walks(const Json& schema, int walks, JsonGrammarOptions o = {}) {
  const JsonGrammar start = JsonGrammar::from_schema(schema, o);
  const test::SchemaCheck check(schema, o.closed_objects);
  for (int seed = 0; seed < walks; ++seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    JsonGrammar g = start;
    std::string text;
    const size_t soft = 20 + rng() % 200;
    for (;;) {
      std::vector<uint8_t> allowed;
      for (int b = 0; b < 256; ++b)
        if (g.can_accept(std::string(1, char(b)))) allowed.push_back(uint8_t(b));
      ASSERT_TRUE(!allowed.empty() || g.complete()) << "stuck after " << testing::PrintToString(text);
      if (g.complete() && (allowed.empty() || rng() % 4 == 0)) break;
      uint8_t b = allowed[rng() % allowed.size()];
      if (text.size() > soft) {
        bool preferred = false;
        for (uint8_t want : {'"', ']', '}', ',', '0', 'n', 't', 'f', 'a'})
          if (std::count(allowed.begin(), allowed.end(), want)) {
            b = want;
            preferred = true;
            break;
          }
        if (!preferred && (b <= ' ' || b == '[' || b == '{')) b = allowed.back();
      }
      ASSERT_TRUE(g.accept(std::string(1, char(b))));
      text += char(b);
      ASSERT_LT(text.size(), 5000u) << "no end in sight: " << testing::PrintToString(text);
    }
    Json value;
    try {
      value = Json::parse(text);
    } catch (const nlohmann::json::out_of_range&) {
      continue;  // a number beyond double's range (1e999): JSON, but nlohmann will not hold it
    } catch (const nlohmann::json::parse_error& e) {
      FAIL() << e.what() << "\n" << testing::PrintToString(text);
    }
    EXPECT_TRUE(check.valid(value)) << "schema: " << schema.dump() << "\ntext: " << text;
    EXPECT_LE(test::SchemaCheck::depth(value), o.max_depth) << text;
  }
}

TEST(JsonSchemaGrammar, RandomWalksNeverGetStuckAndEndValid) {
  JsonGrammarOptions shallow, closed;
  shallow.max_depth = 4;
  closed.closed_objects = true;
  random_walks(Json::parse(kPerson), 150);
  random_walks(Json::parse(kTree), 150, shallow);
  random_walks(Json::parse(R"({"enum":["red","rose","r\u00e9d","\ud83d\ude00",1,12,null]})"), 100);
  random_walks(Json::parse(R"({"type":"object","properties":{"a\u00e9":{"type":"integer"},"ab":{"const":[1,{"x":null}]},
    "\ud83d\ude00":{"type":"string","minLength":2,"maxLength":4}},"required":["ab"],"additionalProperties":false})"), 200);
  random_walks(Json::parse(R"({"anyOf":[{"properties":{"k":{"const":1}},"required":["k"],"additionalProperties":false},
    {"properties":{"k":{"const":2},"v":{"type":"array","minItems":2,"items":{"type":["integer","null"]}}},"required":["v"]},
    {"type":"array","prefixItems":[{"type":"boolean"}],"items":{"type":"string"}}]})"), 200, closed);
  random_walks(Json::parse(R"({"type":"array","items":{"anyOf":[{"type":"integer","minimum":-3,"maximum":1200},
    {"type":"integer","exclusiveMinimum":99999,"maximum":100005},{"type":"integer","maximum":-1000}]}})"), 150);
  random_walks(Json::parse("{}"), 150, shallow);
  random_walks(Json::parse(R"({"type":"object"})"), 100);
}

}  // namespace
}  // namespace deltagen
