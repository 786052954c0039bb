#include "runtime/token_table.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "deltagen/error.h"
#include "runtime/json_grammar.h"
#include "tokenizer/tokenizer.h"

namespace deltagen {

enum class TokenKind : uint8_t { Text, End, Never };

struct TokenTable::Data {
  std::string blob;                       // the text tokens' bytes, in byte order, back to back
  std::vector<std::string_view> by_id;    // into blob (empty for End and Never)
  std::vector<TokenKind> kind;
  std::vector<std::string_view> sorted;   // the text tokens in byte order
  std::vector<uint16_t> shared;           // prefix each shares with the one before
  std::vector<int32_t> sorted_ids;
  std::vector<int64_t> end_ids;
};

namespace {

void check_id(int64_t id, size_t size, const char* what) {
  if (id < 0 || size_t(id) >= size)
    fail("token table", std::string(what) + " id " + std::to_string(id) + " is outside the vocabulary");
}

std::shared_ptr<TokenTable::Data> build(const std::vector<std::string>& bytes, std::vector<TokenKind> kind,
                                        std::span<const int64_t> end_ids) {
  auto d = std::make_shared<TokenTable::Data>();
  for (int64_t id : end_ids) {
    check_id(id, bytes.size(), "end");
    kind[size_t(id)] = TokenKind::End;
    d->end_ids.push_back(id);
  }
  for (size_t id = 0; id < bytes.size(); ++id)
    if (kind[id] == TokenKind::Text && (bytes[id].empty() || bytes[id].size() > UINT16_MAX)) kind[id] = TokenKind::Never;
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes.size(); ++id)
    if (kind[id] == TokenKind::Text) order.push_back(int32_t(id));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes[size_t(a)] < bytes[size_t(b)]; });
  size_t total = 0;
  for (int32_t id : order) total += bytes[size_t(id)].size();
  d->blob.reserve(total);  // no reallocation below: the views stay valid
  d->by_id.resize(bytes.size());
  for (int32_t id : order) {
    const size_t at = d->blob.size();
    d->blob += bytes[size_t(id)];
    const std::string_view view(d->blob.data() + at, bytes[size_t(id)].size());
    d->by_id[size_t(id)] = view;
    const std::string_view before = d->sorted.empty() ? std::string_view() : d->sorted.back();
    size_t common = 0;
    while (common < std::min(view.size(), before.size()) && view[common] == before[common]) ++common;
    d->sorted.push_back(view);
    d->shared.push_back(uint16_t(common));
    d->sorted_ids.push_back(id);
  }
  d->kind = std::move(kind);
  return d;
}

}  // namespace

TokenTable TokenTable::from_tokenizer(const Tokenizer& tokenizer, int64_t vocab, std::span<const int64_t> end_ids) {
  if (vocab < 1) fail("token table", "the vocabulary is empty");
  std::vector<std::string> bytes(size_t(vocab));
  std::vector<TokenKind> kind(size_t(vocab), TokenKind::Never);
  for (int64_t id = 0; id < std::min(vocab, tokenizer.vocab_size()); ++id) {
    if (tokenizer.added_token(id)) continue;
    try {
      bytes[size_t(id)] = tokenizer.token_bytes(id);
      kind[size_t(id)] = TokenKind::Text;
    } catch (const Error&) {  // a hole in the ids: never allowed
    }
  }
  TokenTable t;
  t.data_ = build(bytes, std::move(kind), end_ids);
  return t;
}

TokenTable::TokenTable(const std::vector<std::string>& bytes, std::span<const int64_t> end_ids,
                       std::span<const int64_t> never) {
  std::vector<TokenKind> kind(bytes.size(), TokenKind::Text);
  for (int64_t id : never) {
    check_id(id, bytes.size(), "never");
    kind[size_t(id)] = TokenKind::Never;
  }
  data_ = build(bytes, std::move(kind), end_ids);
}

int64_t TokenTable::size() const { return int64_t(data_->kind.size()); }

std::string_view TokenTable::bytes(int64_t id) const {
  check_id(id, data_->kind.size(), "token");
  return data_->by_id[size_t(id)];
}

bool TokenTable::is_end(int64_t id) const {
  check_id(id, data_->kind.size(), "token");
  return data_->kind[size_t(id)] == TokenKind::End;
}

bool TokenTable::allowed(const JsonGrammar& grammar, int64_t id) const {
  check_id(id, data_->kind.size(), "token");
  switch (data_->kind[size_t(id)]) {
    case TokenKind::Text: return grammar.can_accept(data_->by_id[size_t(id)]);
    case TokenKind::End: return grammar.complete();
    default: return false;
  }
}

void TokenTable::fill_allowed(const JsonGrammar& grammar, std::span<uint8_t> mask) const {
  const Data& d = *data_;
  if (mask.size() != d.kind.size()) fail("token table", "the mask is not vocabulary-sized");
  std::fill(mask.begin(), mask.end(), 0);
  std::vector<uint8_t> ok(d.sorted.size());
  grammar.can_accept_sorted(d.sorted, d.shared, ok);
  for (size_t i = 0; i < ok.size(); ++i) mask[size_t(d.sorted_ids[i])] = ok[i];
  const bool complete = grammar.complete();
  for (int64_t id : d.end_ids) mask[size_t(id)] = complete;
}

bool TokenTable::advance(JsonGrammar& grammar, int64_t id) const {
  check_id(id, data_->kind.size(), "token");
  switch (data_->kind[size_t(id)]) {
    case TokenKind::Text: return grammar.accept(data_->by_id[size_t(id)]);
    case TokenKind::End: return grammar.complete();
    default: return false;
  }
}

}  // namespace deltagen
