// runtime/json_grammar as a JSON validator (no schema): valid documents of
// many shapes accepted whole, byte by byte and in random chunks, with
// complete() true exactly where nlohmann also parses the prefix; invalid ones
// refused at the very byte that makes them so; state untouched by a refused
// accept; whitespace and depth bounds; the sorted bulk check = one by one.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deltagen/error.h"
#include "json_grammar_probe.h"
#include "runtime/json_grammar.h"

namespace deltagen {
namespace {

using Json = nlohmann::ordered_json;
using test::refused_at;

// Valid: accepted whole and in pieces; complete() after each byte exactly
// when nlohmann accepts that prefix as a document (and `also` holds).
void expect_valid(const JsonGrammar& start, const std::string& text,
                  const std::function<bool(const Json&)>& also = [](const Json&) { return true; }) {
  SCOPED_TRACE(text);
  ASSERT_TRUE(Json::accept(text)) << "not JSON: the test is wrong";
  JsonGrammar whole = start;
  ASSERT_TRUE(whole.accept(text));
  EXPECT_TRUE(whole.complete());
  JsonGrammar g = start;
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_TRUE(g.can_accept(text.substr(i, 1))) << "at byte " << i;
    ASSERT_TRUE(g.accept(text.substr(i, 1))) << "at byte " << i;
    const std::string prefix = text.substr(0, i + 1);
    const bool expected = Json::accept(prefix) && also(Json::parse(prefix));
    EXPECT_EQ(g.complete(), expected) << "after " << prefix;
  }
  std::mt19937 rng(uint32_t(text.size()));
  for (int round = 0; round < 5; ++round) {
    JsonGrammar c = start;
    for (size_t i = 0; i < text.size();) {
      const size_t n = 1 + rng() % 7;
      ASSERT_TRUE(c.accept(text.substr(i, n))) << "chunk at " << i;
      i += n;
    }
    EXPECT_TRUE(c.complete());
  }
}

TEST(JsonGrammar, AcceptsValidJsonOfManyShapes) {
  const auto any = JsonGrammar::any_value();
  for (const std::string text : {
           "0", "-0", "12", "-12.5e+3", "1E5", "0.0", "1e-0", "-0.000e007", "true", "false", "null", "\"\"",
           R"("a\"b\\c\/d\b\f\n\r\t")", R"("\u0041\u00e9\u20AC\ud83d\ude00")", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
           R"("\u0000")", R"(["\uDBFF\uDFFF"])", "\"\xf4\x8f\xbf\xbf\"", "\"\xef\xbf\xbf\"", "[]", "[ ]", "{}", "{ }",
           "[1,[2,[3,{}]]]", R"({"a":{"b":{"c":[null]}}})", " \n\t{\"k\" : [ true , false ] }\r\n",
           R"({"":""})", R"({"a":1,"a":2})", R"([1.5,-2,3e10,"x",{"y":[]}])", "123456789012345678901234567890"})
    expect_valid(any, text);
}

TEST(JsonGrammar, RefusesInvalidJsonAtTheByteThatBreaksIt) {
  const auto any = JsonGrammar::any_value();
  const std::pair<std::string, size_t> cases[] = {
      {"[1,]", 3},
      {R"({"a":1,})", 7},
      {"01", 1},
      {"--1", 1},
      {"1.e3", 2},
      {".5", 0},
      {"+1", 0},
      {"[1 2]", 3},
      {R"({"a" 1})", 5},
      {"{a:1}", 1},
      {"\"a\nb\"", 2},     // raw control character
      {"\"\t\"", 1},
      {R"("\x")", 2},      // no such escape
      {R"("\u12G4")", 5},
      {R"("\ud800")", 7},  // a high surrogate alone
      {R"("\udc00")", 4},  // a low one alone: refused as soon as it can be nothing else
      {R"("\ud800\u0041")", 9},
      {"trux", 3},
      {"True", 0},
      {"{}x", 2},
      {"[][]", 2},
      {"\"\xc0\x80\"", 1},      // overlong
      {"\"\xe0\x80\x80\"", 2},  // overlong
      {"\"\xed\xa0\x80\"", 2},  // an encoded surrogate
      {"\"\xf4\x90\x80\x80\"", 2},  // above U+10FFFF
      {"\"\xf5\"", 1},
      {"\"\x80\"", 1},
      {"\"\xe2\x82\"", 3},
      {R"({"a":})", 5},
      {"{,}", 1},
      {"[,1]", 1},
      {"NaN", 0},
      {"Infinity", 0},
      {"-Infinity", 1},
      {"[1,2", std::string::npos},  // unfinished: nothing refused, never complete
      {"\"abc", std::string::npos},
      {"-", std::string::npos},
      {"1e+", std::string::npos},
      {"nul", std::string::npos},
  };
  for (const auto& [text, at] : cases) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(Json::accept(text)) << "valid JSON: the test is wrong";
    EXPECT_EQ(refused_at(any, text), at);
    JsonGrammar g = any;
    EXPECT_FALSE(g.accept(text) && g.complete());
  }
}

TEST(JsonGrammar, AnyObjectIsOneObject) {
  const auto object = JsonGrammar::any_object();
  expect_valid(object, " {\"a\": [1, {\"b\": null}]} \n", [](const Json& j) { return j.is_object(); });
  expect_valid(object, "{}", [](const Json& j) { return j.is_object(); });
  for (const std::string text : {"[]", "1", "\"s\"", "null", "true"}) EXPECT_EQ(refused_at(object, text), 0u) << text;
  EXPECT_EQ(refused_at(object, "{}{}"), 2u);
  EXPECT_EQ(refused_at(object, "  x"), 2u);
}

TEST(JsonGrammar, ARefusedAcceptChangesNothing) {
  auto g = JsonGrammar::any_value();
  ASSERT_TRUE(g.accept("{\"a\":"));
  EXPECT_FALSE(g.accept("1,}"));
  EXPECT_FALSE(g.can_accept("}"));
  EXPECT_FALSE(g.complete());
  EXPECT_TRUE(g.accept("1}"));
  EXPECT_TRUE(g.complete());
  EXPECT_TRUE(g.accept(""));
  g.reset();
  EXPECT_FALSE(g.complete());
  EXPECT_TRUE(g.accept("[]"));
}

TEST(JsonGrammar, ANumberMayGrowAfterItIsComplete) {
  auto g = JsonGrammar::any_value();
  ASSERT_TRUE(g.accept("12"));
  EXPECT_TRUE(g.complete());
  EXPECT_TRUE(g.can_accept("3"));
  EXPECT_TRUE(g.can_accept(".5e1"));
  ASSERT_TRUE(g.accept(" "));
  EXPECT_TRUE(g.complete());
  EXPECT_FALSE(g.can_accept("3"));
}

TEST(JsonGrammar, WhitespaceRunsAreBounded) {
  JsonGrammarOptions o;
  o.max_whitespace_run = 4;
  const auto g = JsonGrammar::any_value(o);
  EXPECT_EQ(refused_at(g, "{    \"a\":1}"), std::string::npos);
  EXPECT_EQ(refused_at(g, "{     \"a\":1}"), 5u);
  EXPECT_EQ(refused_at(g, "[1 \n\t ,2]"), std::string::npos);
  EXPECT_EQ(refused_at(g, "{}    "), std::string::npos);
  EXPECT_EQ(refused_at(g, "{}     "), 6u);  // after the document: a bounded tail, then only the end
  EXPECT_EQ(refused_at(g, "\"          \""), std::string::npos);  // strings are not limited
  EXPECT_EQ(refused_at(g, "[1    ,    2    ]"), std::string::npos);
}

TEST(JsonGrammar, NestingDepthIsBounded) {
  JsonGrammarOptions o;
  o.max_depth = 3;
  const auto g = JsonGrammar::any_value(o);
  expect_valid(g, "[[[]]]");
  expect_valid(g, R"({"a":{"b":{"c":1}}})");
  EXPECT_EQ(refused_at(g, "[[[["), 3u);
  EXPECT_EQ(refused_at(g, R"({"a":{"b":{"c":{)"), 15u);
  JsonGrammar deep = g;
  ASSERT_TRUE(deep.accept("[[["));
  for (const char* next : {"1", "\"x\"", "null", "]", " "}) EXPECT_TRUE(deep.can_accept(next)) << next;
  EXPECT_FALSE(deep.can_accept("{"));

  o.max_depth = 64;
  std::string sixty_four(64, '[');
  sixty_four += std::string(64, ']');
  expect_valid(JsonGrammar::any_value(o), sixty_four);
  EXPECT_EQ(refused_at(JsonGrammar::any_value(o), std::string(65, '[')), 64u);
}

TEST(JsonGrammar, OptionsOutOfRangeAreErrors) {
  for (int depth : {0, 65}) {
    JsonGrammarOptions o;
    o.max_depth = depth;
    EXPECT_THROW(JsonGrammar::any_value(o), Error);
  }
  JsonGrammarOptions o;
  o.max_whitespace_run = 256;
  EXPECT_THROW(JsonGrammar::any_object(o), Error);
}

TEST(JsonGrammar, CopiesAreIndependent) {
  auto a = JsonGrammar::any_value();
  ASSERT_TRUE(a.accept("[1,"));
  JsonGrammar b = a;
  ASSERT_TRUE(b.accept("2]"));
  EXPECT_TRUE(b.complete());
  EXPECT_FALSE(a.complete());
  EXPECT_TRUE(a.accept("\"x\"]"));
  a = b;
  EXPECT_TRUE(a.complete());
  JsonGrammar moved = std::move(b);
  EXPECT_TRUE(moved.complete());
}

// The bulk check over sorted strings gives what can_accept gives one by one,
// in states of every kind.
TEST(JsonGrammar, SortedBulkCheckMatchesOneByOne) {
  std::vector<std::string> pieces = {"", "{", "}", "\"", "\"a", "\"a\"", "\"a\":", ":", ",", ", ", " ", "  ", "1", "12",
                                     "1.", ".5", "e3", "tr", "true", "null", "]", "[", "[1", "\\", "\\u", "\\u00e9",
                                     "\\ud83d", "\\ude00", "é", "\xc3", "\xa9", "\xe2\x82", "\xac", "abc", "ab\"", "\"}"};
  for (int i = 0; i < 256; ++i) pieces.push_back(std::string(1, char(i)));
  std::sort(pieces.begin(), pieces.end());
  pieces.erase(std::unique(pieces.begin(), pieces.end()), pieces.end());
  std::vector<std::string_view> views(pieces.begin(), pieces.end());
  std::vector<uint16_t> shared(views.size(), 0);
  for (size_t i = 1; i < views.size(); ++i)
    while (shared[i] < std::min(views[i].size(), views[i - 1].size()) && views[i][shared[i]] == views[i - 1][shared[i]])
      ++shared[i];
  auto schema = JsonGrammar::from_schema(Json::parse(
      R"({"type":"object","properties":{"a":{"type":"string"},"b":{"enum":["x","é"]}},"additionalProperties":false})"));
  for (const auto& [start, prefixes] :
       std::vector<std::pair<JsonGrammar, std::vector<std::string>>>{
           {JsonGrammar::any_value(), {"", "{", "{\"a\"", "{\"a\":", "[1", "[\"", "[\"\\", "\"\\u", "\"\xe2", "12", "{}"}},
           {schema, {"", "{", "{\"", "{\"a\":\"", "{\"b\":\"", "{\"b\":\"\\u00", "{\"a\":\"x\"", "{\"a\":\"x\","}}}) {
    for (const std::string& prefix : prefixes) {
      JsonGrammar g = start;
      ASSERT_TRUE(g.accept(prefix)) << prefix;
      std::vector<uint8_t> out(views.size(), 2);
      g.can_accept_sorted(views, shared, out);
      for (size_t i = 0; i < views.size(); ++i)
        EXPECT_EQ(out[i], g.can_accept(views[i]) ? 1 : 0) << "after " << prefix << " piece " << testing::PrintToString(pieces[i]);
    }
  }
}

}  // namespace
}  // namespace deltagen
