// Constrained decoding for JSON: an incremental validator that says, byte by
// byte, whether a text is still the prefix of a JSON document (OpenAI's
// response_format json_object), or of one that matches a JSON Schema
// (response_format json_schema). The server asks it which tokens may come
// next (runtime/token_table.h) and lets the sampler choose among those only.
//
//   auto grammar = JsonGrammar::from_schema(schema);   // throws Error for what it does not support
//   grammar.can_accept("{\"a\"");   // would these bytes keep it a valid prefix? (state unchanged)
//   grammar.accept("{\"a\"");       // the same, and consume them if so
//   grammar.complete();             // a whole document has been read: end of text allowed here
//
// It is a pushdown automaton over bytes: a stack of frames (root, object,
// array, string, number, literal) per way of reading the text. A schema's
// anyOf can leave several readings alive at once ({"a":1 fits two object
// alternatives); the state is then a few stacks, each fed every byte, and a
// stack dies when its reading fails. The state is small (live frames only are
// copied) so that checking a candidate token is: copy, feed its bytes, look.
//
// Guarantees, for every accepted prefix:
//   - some continuation completes it into a valid document (no dead ends):
//     the schema is analysed for the least nesting each part needs, and
//     object keys, enum strings and escapes are only begun where they can end;
//   - complete() holds exactly when the text so far is a whole document;
//   - strings are valid UTF-8 (raw and escaped: no lone surrogates), no raw
//     control characters; numbers follow RFC 8259 exactly.
//
// The JSON Schema subset (anything else is an Error naming the keyword and
// where it is, e.g. `response_format.json_schema: "patternProperties" is not
// supported (at #/properties/tags)`):
//   type (a name or a list; without type, keywords of a type imply it: a
//     schema with "properties" only admits objects, stricter than JSON
//     Schema, which would let other types through), properties, required,
//     additionalProperties (a schema, true, false; absent = any value, unless
//     JsonGrammarOptions::closed_objects), items, prefixItems, items as a list
//     + additionalItems (draft 7), minItems, maxItems, minLength, maxLength,
//     minimum / maximum / exclusiveMinimum / exclusiveMaximum for "integer"
//     (bounds within +-2^53; digits are taken only while the number can still
//     end in bounds: 12 is taken for [0, 120], 121 is not),
//     enum, const (also objects and arrays; a number matches its own spelling
//     only: 1.0 does not match 1), anyOf, oneOf (read as anyOf: an output
//     that fits two alternatives is accepted), allOf with one schema, $ref to
//     "#" or "#/any/json/pointer" (so #/$defs/x, #/definitions/x; recursive
//     schemas work), $defs and definitions, true and false.
//   Ignored, as they do not change which values are valid: title,
//     description, default, examples, $schema, $id, $comment, deprecated,
//     readOnly, writeOnly, contentEncoding, contentMediaType; and format (not
//     enforced: "format": "date-time" admits any string).
//   Not supported (Error): pattern, patternProperties, propertyNames,
//     bounds on "number" (non-integers), multipleOf, uniqueItems,
//     contains, min/maxProperties, not, if/then/else, dependent*, unevaluated*,
//     $ref or anyOf next to other validity keywords, remote $refs.
// Duplicate keys: a property the schema names may appear once; other keys
// are not tracked, so an open object may repeat one of those.
// At most 8 readings stay alive at once: an anyOf that would fork more keeps
// the first alternatives (in schema order) and drops the others, which makes
// the grammar stricter, never wrong.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deltagen {

namespace json_rules {
struct Rules;
struct Stacks;
}  // namespace json_rules

struct JsonGrammarOptions {
  // Objects and arrays nested deeper than this are refused (at most 64).
  int max_depth = 32;
  // Whitespace between tokens, in a row: a model that "thinks" in newlines
  // would otherwise never get out of them. After the document only this much
  // whitespace may follow (then only the end). Strings are not limited.
  int max_whitespace_run = 48;
  // A schema object without additionalProperties admits no other keys (as in
  // OpenAI's strict mode, which requires additionalProperties: false).
  bool closed_objects = false;
  // The first words of every schema Error.
  std::string error_subject = "response_format.json_schema";
};

class JsonGrammar {
 public:
  // One JSON object (OpenAI's json_object mode), whitespace around it allowed.
  static JsonGrammar any_object(const JsonGrammarOptions& options = {});
  // Any JSON value.
  static JsonGrammar any_value(const JsonGrammarOptions& options = {});
  // One value that matches `schema`. Throws Error (one line, naming the
  // keyword and its place) for a schema outside the subset above, or one that
  // no value within max_depth can match.
  static JsonGrammar from_schema(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options = {});

  JsonGrammar(const JsonGrammar& other);
  JsonGrammar& operator=(const JsonGrammar& other);
  JsonGrammar(JsonGrammar&& other) noexcept;
  JsonGrammar& operator=(JsonGrammar&& other) noexcept;
  ~JsonGrammar();

  // Consumes `bytes` if the text stays a valid prefix; otherwise returns
  // false and leaves the state unchanged. Bytes may split UTF-8 characters.
  bool accept(std::string_view bytes);
  bool can_accept(std::string_view bytes) const;
  // can_accept for many byte strings at once, much faster than one by one
  // when they share prefixes: `sorted` in byte order (as std::string_view
  // compares), shared[i] = the length of the prefix sorted[i] has in common
  // with sorted[i - 1] (shared[0] = 0). Writes out[i] = 1 or 0.
  void can_accept_sorted(std::span<const std::string_view> sorted, std::span<const uint16_t> shared,
                         std::span<uint8_t> out) const;
  // The text so far is one whole document: the end may come here (only
  // whitespace may follow it; a number may still grow: "12" -> "123").
  bool complete() const;
  // How many characters of free text may come next: inside a string that
  // takes any text here (one reading, no enum to match, not in the middle of
  // an escape or a UTF-8 character), the code points its maxLength still
  // allows (SIZE_MAX if none); 0 elsewhere. Where it is n > 0, any n valid
  // UTF-8 characters without '"', '\\' and control characters are accepted:
  // TokenTable tests most tokens in a string without feeding them.
  size_t free_text_room() const;
  // Back to the empty text.
  void reset();
  // Readings alive (more than 1 only inside an ambiguous anyOf).
  int readings() const;

 private:
  explicit JsonGrammar(std::shared_ptr<const json_rules::Rules> rules);
  std::shared_ptr<const json_rules::Rules> rules_;
  std::unique_ptr<json_rules::Stacks> stacks_;
};

}  // namespace deltagen
