// Constrained generation end to end on a toy vocabulary: the 256 byte
// tokens, multi-byte pieces as a BPE vocabulary has them, an end token and a
// markup token. With random logits (any model, however bad), every seed and
// sampling setting generates a document that parses and matches the schema,
// ends with the end token only where the grammar is complete, and never
// picks the markup token. And TokenTable's bulk mask = its per-id test.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deltagen/error.h"
#include "json_schema_check.h"
#include "runtime/json_grammar.h"
#include "runtime/sampling.h"
#include "runtime/token_table.h"
#include "tokenizer/tokenizer.h"

namespace deltagen {
namespace {

using Json = nlohmann::ordered_json;

struct Toy {
  std::vector<std::string> bytes;
  int64_t end = 0, markup = 0;
  TokenTable table;
};

Toy toy_vocabulary() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
  for (const char* piece : {"{\"", "\":", "\": ", "\",", "\", \"", "\"}", "}}", "]}", "},", "[{", "true", "false", "null",
                            "  ", "    ", "\n", "\n  ", "name", "age", "tags", "value", "children", "\\u00", "\\n", "\\\"",
                            "12", "0.", "e+", "-1", "\xc3\xa9", "\xe2\x82", "\xac", "\xf0\x9f\x98\x80", "abc", " the",
                            "\"a", "a\"", ",\"", "\":\"", "[]", "{}", "1,", "\"\"", "\xed\xa0\x80", "\\ud83d"})
    bytes.push_back(piece);
  const int64_t end = int64_t(bytes.size()), markup = end + 1;
  bytes.push_back("<|im_end|>");
  bytes.push_back("<think>");
  bytes.push_back("");  // an empty token: never allowed
  const std::vector<int64_t> ends = {end}, never = {markup};
  return {bytes, end, markup, TokenTable(bytes, ends, never)};
}

const char* kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},
        "tags":{"type":"array","items":{"enum":["a","b\u00e9","c"]},"maxItems":3}},"required":["name","age"],
        "additionalProperties":false})",
    R"({"$defs":{"node":{"type":"object","additionalProperties":false,"required":["value"],
        "properties":{"value":{"type":["number","null"]},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},
        "$ref":"#/$defs/node"})",
    R"({"anyOf":[{"type":"array","prefixItems":[{"const":true},{"type":"string","minLength":2}],"items":false},
        {"type":"object","properties":{"k":{"type":"integer"}},"required":["k"],"additionalProperties":false},
        {"enum":["red",12,null]}]})",
};

// Generates with random logits: late on, the end and the closing tokens
// gain weight so that documents end. Returns the text.
std::string generate(const Toy& toy, JsonGrammar grammar, const SamplingOptions& o, uint64_t seed) {
  Sampler sampler(o, toy.table.size(), seed);
  std::mt19937 rng(uint32_t(seed * 31 + 7));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(size_t(toy.table.size()));
  std::string text;
  for (int step = 0; step < 4000; ++step) {
    for (auto& l : logits) l = normal(rng);
    const float push = step > 40 ? float(step - 40) * 0.3f : 0.0f;
    for (char c : {'}', ']', '"'}) logits[size_t(uint8_t(c))] += push;
    logits[size_t(toy.end)] += push;
    logits[size_t(toy.markup)] += 5;  // the model loves it: it must still never come
    const int64_t id = sampler.next(
        logits.data(), [&](int64_t t) { return toy.table.allowed(grammar, t); },
        [&](std::span<uint8_t> mask) { toy.table.fill_allowed(grammar, mask); });
    EXPECT_NE(id, toy.markup);
    if (id == toy.end) {
      EXPECT_TRUE(grammar.complete()) << text;
      return text;
    }
    EXPECT_TRUE(toy.table.advance(grammar, id)) << "chose a token the grammar refuses";
    text += toy.bytes[size_t(id)];
  }
  ADD_FAILURE() << "no end after 4000 tokens: " << text;
  return text;
}

TEST(JsonGeneration, AnyModelProducesValidJsonForTheSchema) {
  const Toy toy = toy_vocabulary();
  std::vector<SamplingOptions> settings(5);
  settings[1].temperature = 1.0;
  settings[2].temperature = 0.7, settings[2].top_p = 0.9;
  settings[3].temperature = 1.5, settings[3].top_k = 20, settings[3].min_p = 0.05;
  settings[4].temperature = 1.0, settings[4].frequency_penalty = 0.5;
  JsonGrammarOptions shallow;
  shallow.max_depth = 6;
  int documents = 0;
  for (const char* schema_text : kSchemas) {
    const Json schema = Json::parse(schema_text);
    const JsonGrammar start = JsonGrammar::from_schema(schema, shallow);
    const test::SchemaCheck check(schema);
    for (const SamplingOptions& o : settings)
      for (uint64_t seed = 0; seed < 12; ++seed) {
        const std::string text = generate(toy, start, o, seed);
        ASSERT_TRUE(Json::accept(text)) << text;
        EXPECT_TRUE(check.valid(Json::parse(text))) << schema_text << "\n" << text;
        EXPECT_LE(test::SchemaCheck::depth(Json::parse(text)), 6) << text;
        ++documents;
      }
  }
  for (uint64_t seed = 0; seed < 20; ++seed) {  // json_object mode
    const std::string text = generate(toy, JsonGrammar::any_object(), settings[seed % 5], seed);
    ASSERT_TRUE(Json::accept(text)) << text;
    EXPECT_TRUE(Json::parse(text).is_object()) << text;
  }
  EXPECT_EQ(documents, 3 * 5 * 12);
}

TEST(JsonGeneration, BulkMaskEqualsPerIdTest) {
  const Toy toy = toy_vocabulary();
  std::mt19937 rng(1);
  for (const char* schema_text : kSchemas) {
    JsonGrammar g = JsonGrammar::from_schema(Json::parse(schema_text));
    for (int step = 0; step < 60; ++step) {
      std::vector<uint8_t> mask(size_t(toy.table.size()), 7);
      toy.table.fill_allowed(g, mask);
      std::vector<int64_t> allowed;
      for (int64_t id = 0; id < toy.table.size(); ++id) {
        ASSERT_EQ(mask[size_t(id)], toy.table.allowed(g, id) ? 1 : 0) << "id " << id << " at step " << step;
        if (id < toy.end) {  // text: what feeding its bytes says (no shortcut for free text)
          ASSERT_EQ(mask[size_t(id)], g.can_accept(toy.bytes[size_t(id)]) ? 1 : 0) << "id " << id << " at step " << step;
        }
        if (mask[size_t(id)] && id != toy.end) allowed.push_back(id);
      }
      EXPECT_EQ(mask[size_t(toy.end)], g.complete() ? 1 : 0);
      EXPECT_EQ(mask[size_t(toy.markup)], 0);
      EXPECT_EQ(mask.back(), 0);  // the empty token
      if (allowed.empty()) break;
      ASSERT_TRUE(toy.table.advance(g, allowed[rng() % allowed.size()]));
    }
  }
}

// The real vocabulary (when the Qwen3 tokenizer assets are there): the
// bulk mask, with its shortcut for free text, = feeding each token's bytes.
TEST(JsonGeneration, QwenVocabularyMaskEqualsFeedingEachToken) {
  const char* assets = std::getenv("DELTAGEN_TOKENIZER_ASSETS");
#ifdef DELTAGEN_SOURCE_DIR
  const std::string dir = assets ? std::string(assets) : std::string(DELTAGEN_SOURCE_DIR) + "/third_party/tokenizer";
#else
  const std::string dir = assets ? std::string(assets) : std::string("third_party/tokenizer");
#endif
  if (!std::filesystem::exists(dir + "/qwen3/tokenizer.json")) GTEST_SKIP() << "no " << dir << "/qwen3/tokenizer.json";
  const Tokenizer tokenizer = Tokenizer::load(dir + "/qwen3");
  const std::vector<int64_t> ends = {*tokenizer.token_to_id("<|im_end|>")};
  const TokenTable table = TokenTable::from_tokenizer(tokenizer, 151936, ends);
  const auto schema = Json::parse(R"({"type":"object","properties":{"name":{"type":"string","maxLength":3},
    "note":{"type":"string"},"kind":{"enum":["a\u00e9","b"]}},"additionalProperties":false})");
  const std::pair<JsonGrammar, const char*> states[] = {
      {JsonGrammar::any_object(), ""},      {JsonGrammar::any_object(), "{\"k"},
      {JsonGrammar::from_schema(schema), "{\"note\": \"x"}, {JsonGrammar::from_schema(schema), "{\"name\": \"x"},
      {JsonGrammar::from_schema(schema), "{\"kind\": \""},  {JsonGrammar::from_schema(schema), "{\"note\": \"\xe2\x82"},
      {JsonGrammar::any_value(), "[1"},      {JsonGrammar::any_value(), "{}"}};
  for (auto [g, prefix] : states) {
    ASSERT_TRUE(g.accept(prefix)) << prefix;
    std::vector<uint8_t> mask(151936);
    table.fill_allowed(g, mask);
    int64_t allowed = 0;
    for (int64_t id = 0; id < 151936; ++id) {
      bool expected = false;
      if (id < tokenizer.vocab_size() && !tokenizer.added_token(id)) expected = g.can_accept(tokenizer.token_bytes(id));
      if (id == ends[0]) expected = g.complete();
      ASSERT_EQ(mask[size_t(id)], expected ? 1 : 0) << "after " << prefix << ": id " << id;
      ASSERT_EQ(table.allowed(g, id), expected);
      allowed += expected;
    }
    EXPECT_GT(allowed, 0) << prefix;
  }
}

TEST(JsonGeneration, TableChecksIds) {
  const Toy toy = toy_vocabulary();
  const auto g = JsonGrammar::any_value();
  EXPECT_THROW(toy.table.allowed(g, -1), Error);
  EXPECT_THROW(toy.table.allowed(g, toy.table.size()), Error);
  EXPECT_EQ(toy.table.bytes('{'), "{");
  EXPECT_TRUE(toy.table.is_end(toy.end));
  EXPECT_EQ(toy.table.bytes(toy.end), "");
  const std::vector<int64_t> bad = {300};
  EXPECT_THROW(TokenTable(std::vector<std::string>{"a"}, bad), Error);
}

}  // namespace
}  // namespace deltagen
