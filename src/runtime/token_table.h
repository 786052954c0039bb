// Tokens as a grammar sees them: every id's bytes, made once per tokenizer,
// and which ids may come next in a JsonGrammar's state. The glue between
// runtime/json_grammar.h and the constrained Sampler::next:
//
//   const auto table = TokenTable::from_tokenizer(tokenizer, vocab, end_ids);  // once
//   JsonGrammar grammar = JsonGrammar::from_schema(schema);                      // per request
//   // each step:
//   const int64_t id = sampler.next(logits,
//       [&](int64_t id) { return table.allowed(grammar, id); },
//       [&](std::span<uint8_t> mask) { table.fill_allowed(grammar, mask); });
//   table.advance(grammar, id);  // an end id: the sequence stops here
//
// End ids (EOS, <|im_end|>) are allowed exactly where the grammar is
// complete(). Added tokens (special or not: <|im_start|>, <think>,
// <tool_call>, ...) are never allowed: they are markup the chat template and
// the output parser act on, not text. Nor are ids the tokenizer does not
// have (the model's rows beyond it) or tokens of no bytes.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deltagen {

class JsonGrammar;
class Tokenizer;

class TokenTable {
 public:
  struct Data;
  // `vocab`: ids per logits row (the model's, often more than the tokenizer's).
  static TokenTable from_tokenizer(const Tokenizer& tokenizer, int64_t vocab, std::span<const int64_t> end_ids);
  // From each id's bytes (tests, other tokenizers); `never` ids are refused like added tokens.
  TokenTable(const std::vector<std::string>& bytes, std::span<const int64_t> end_ids,
             std::span<const int64_t> never = {});

  int64_t size() const;
  std::string_view bytes(int64_t id) const;
  bool is_end(int64_t id) const;

  // Whether `id` may come next. Throws Error for ids outside [0, size()).
  bool allowed(const JsonGrammar& grammar, int64_t id) const;
  // mask[id] = allowed(grammar, id) for every id, at once: the text tokens
  // in byte order, so that a shared prefix is fed once and a refused one
  // refuses every token that starts with it. mask.size() must be size().
  void fill_allowed(const JsonGrammar& grammar, std::span<uint8_t> mask) const;
  // Feeds the chosen id's bytes to the grammar; false (grammar unchanged) if
  // it is not allowed. An end id, allowed, changes nothing: generation stops.
  bool advance(JsonGrammar& grammar, int64_t id) const;

 private:
  TokenTable() = default;
  std::shared_ptr<const Data> data_;
};

}  // namespace deltagen
