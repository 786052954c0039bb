// Fuzzes runtime/json_grammar (and runtime/token_table's bulk mask) with a
// schema and a text. Input: byte 0 picks the mode (bits 0-1: any value, any
// object, schema, schema with closed objects), the depth limit (bits 2-4:
// 1-8) and the chunking seed (bits 5-7); with a schema, the rest is
// "schema JSON \0 text", else the text.
//
// Properties:
//   - a schema compiles or throws deltagen::Error (one line), nothing else;
//   - the text is accepted up to the same byte whether fed whole, byte by
//     byte or in chunks, and a refused accept changes nothing;
//   - where it stops, a continuation exists (some byte is allowed) unless
//     the document is complete: no dead ends;
//   - a complete prefix is JSON that nlohmann parses, within the depth limit,
//     an object in object mode, and valid per an independent validator of
//     the schema (tests/json_schema_check.h);
//   - any value mode agrees with nlohmann both ways (within the limits);
//   - TokenTable::fill_allowed on a small vocabulary = feeding each token.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../tests/json_schema_check.h"
#include "fuzz_util.h"
#include "runtime/json_grammar.h"
#include "runtime/token_table.h"

using namespace deltagen;
using Json = nlohmann::ordered_json;

namespace {

const TokenTable& table() {
  static const TokenTable t = [] {
    std::vector<std::string> bytes;
    for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, char(b)));
    for (const char* piece : {"{\"", "\":", "\",\"", "\"}", "]}", "true", "null", "  ", "\n ", "\\u00", "\\ud83d",
                              "12", "0.", "e-", "\xc3\xa9", "\xe2\x82", "\xac", "abc", "a\"", "\"\"", "[]", "{}", "1,"})
      bytes.push_back(piece);
    bytes.push_back("<end>");
    const std::vector<int64_t> ends = {int64_t(bytes.size() - 1)};
    return TokenTable(bytes, ends);
  }();
  return t;
}

size_t longest_space_run(std::string_view text) {
  size_t best = 0, run = 0;
  for (char c : text) {
    run = (c == ' ' || c == '\t' || c == '\n' || c == '\r') ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

// nlohmann's view of a text: 1 valid, 0 invalid, -1 a number beyond double's range (JSON, but it will not hold it).
int nlohmann_view(const std::string& text, Json* value) {
  try {
    *value = Json::parse(text);
    return 1;
  } catch (const nlohmann::json::out_of_range&) {
    return -1;
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int mode = data[0] & 3;
  JsonGrammarOptions options;
  options.max_depth = 1 + (data[0] >> 2 & 7);
  options.max_whitespace_run = 255;
  options.closed_objects = mode == 3;
  uint32_t rng = uint32_t(data[0] >> 5) * 2654435761u + 1;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);

  Json schema;
  std::string_view text = rest;
  if (mode >= 2) {
    const size_t zero = rest.find('\0');
    if (zero == std::string_view::npos) return 0;
    schema = Json::parse(rest.substr(0, zero), nullptr, false);
    if (schema.is_discarded()) return 0;
    text = rest.substr(zero + 1);
  }
  std::optional<JsonGrammar> start;
  fuzz::expect_only_error("from_schema", [&] {
    start.emplace(mode == 0   ? JsonGrammar::any_value(options)
                  : mode == 1 ? JsonGrammar::any_object(options)
                              : JsonGrammar::from_schema(schema, options));
  });
  if (!start) return 0;

  try {
    // Byte by byte: how far the text stays a valid prefix.
    JsonGrammar g = *start;
    size_t accepted = 0;
    while (accepted < text.size() && g.accept(text.substr(accepted, 1))) ++accepted;
    if (accepted < text.size()) {
      const bool was_complete = g.complete();
      if (g.accept(text.substr(accepted))) fuzz::finding("accepted the rest after refusing its first byte");
      if (g.complete() != was_complete) fuzz::finding("a refused accept changed complete()");
    }
    JsonGrammar whole = *start;
    if (whole.accept(text) != (accepted == text.size())) fuzz::finding("whole and byte by byte disagree");
    JsonGrammar chunked = *start;
    size_t at = 0;
    while (at < accepted) {
      rng = rng * 1664525u + 1013904223u;
      const size_t n = std::min<size_t>(1 + (rng >> 28), accepted - at);
      if (!chunked.accept(text.substr(at, n))) fuzz::finding("chunks refused what bytes accepted");
      at += n;
    }
    if (chunked.complete() != g.complete()) fuzz::finding("chunks and bytes end differently");

    // No dead end; the bulk mask = feeding each token.
    bool some_byte = false;
    for (int b = 0; b < 256 && !some_byte; ++b) some_byte = g.can_accept(std::string(1, char(b)));
    if (!some_byte && !g.complete()) fuzz::finding("dead end: no byte allowed, document not complete");
    const TokenTable& t = table();
    std::vector<uint8_t> mask(size_t(t.size()));
    t.fill_allowed(g, mask);
    for (int64_t id = 0; id < t.size(); ++id) {
      const bool expected = t.is_end(id) ? g.complete() : g.can_accept(t.bytes(id));
      if (mask[size_t(id)] != expected || t.allowed(g, id) != expected) fuzz::finding("token mask differs from feeding");
    }

    // A complete prefix is valid JSON of the schema.
    const std::string prefix(text.substr(0, accepted));
    Json value;
    const int view = nlohmann_view(prefix, &value);
    if (g.complete()) {
      if (view == 0) fuzz::finding("complete, but nlohmann refuses: " + prefix);
      if (view == 1) {
        if (test::SchemaCheck::depth(value) > options.max_depth) fuzz::finding("deeper than max_depth");
        if (mode == 1 && !value.is_object()) fuzz::finding("json_object mode completed a non-object");
        if (mode >= 2 && !test::SchemaCheck(schema, options.closed_objects).valid(value))
          fuzz::finding("complete, but not valid per the schema: " + prefix);
      }
    }
    if (mode == 0 && text.find('\0') == std::string_view::npos) {  // any value: nlohmann's JSON, within the limits
      // (nlohmann takes a NUL byte for the end of the input: not comparable then)
      Json full;
      const int full_view = nlohmann_view(std::string(text), &full);
      const bool within = longest_space_run(text) <= 255 && (full_view != 1 || test::SchemaCheck::depth(full) <= options.max_depth);
      if (full_view == 1 && within && !(whole.complete() && accepted == text.size()))
        fuzz::finding("nlohmann accepts, the grammar does not: " + std::string(text));
      if (full_view == 0 && accepted == text.size() && whole.complete())
        fuzz::finding("the grammar accepts, nlohmann does not: " + std::string(text));
    }
  } catch (const std::exception& e) {
    fuzz::finding(std::string("threw: ") + e.what());
  }
  return 0;
}
