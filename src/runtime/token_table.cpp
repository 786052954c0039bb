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
  // Free text (JsonGrammar::free_text_room): per id, the code points of a
  // token that is whole UTF-8 characters without '"', '\\' or controls, 0 if
  // it is not; and the other text tokens, sorted as above.
  std::vector<uint8_t> plain_chars;
  std::vector<int32_t> plain_ids;
  std::vector<std::string_view> odd_sorted;
  std::vector<uint16_t> odd_shared;
  std::vector<int32_t> odd_ids;
};

namespace {

// The code points of `bytes` if they are whole, valid UTF-8 characters (as
// the grammar checks them) none of which is '"', '\\' or below 0x20; else 0
// (also above 255 characters).
uint8_t plain_chars(std::string_view bytes) {
  size_t chars = 0;
  for (size_t i = 0; i < bytes.size(); ++chars) {
    const auto b = uint8_t(bytes[i]);
    if (b < 0x80) {
      if (b < 0x20 || b == '"' || b == '\\') return 0;
      ++i;
      continue;
    }
    int tail;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      tail = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      tail = 2;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      tail = 3;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return 0;
    }
    if (i + size_t(tail) >= bytes.size()) return 0;  // cut short: the rest comes in another token
    for (int k = 1; k <= tail; ++k) {
      const auto c = uint8_t(bytes[i + size_t(k)]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return 0;
    }
    i += size_t(tail) + 1;
  }
  return chars <= 255 ? uint8_t(chars) : 0;
}

// Byte-ordered views of the tokens `ids` (already in byte order), with the
// prefix each shares with the one before.
void lay_sorted(const std::vector<std::string_view>& by_id, const std::vector<int32_t>& ids,
                std::vector<std::string_view>& sorted, std::vector<uint16_t>& shared) {
  for (int32_t id : ids) {
    const std::string_view view = by_id[size_t(id)];
    const std::string_view before = sorted.empty() ? std::string_view() : sorted.back();
    size_t common = 0;
    while (common < std::min(view.size(), before.size()) && view[common] == before[common]) ++common;
    sorted.push_back(view);
    shared.push_back(uint16_t(common));
  }
}

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
  d->plain_chars.assign(bytes.size(), 0);
  for (int32_t id : order) {
    const size_t at = d->blob.size();
    d->blob += bytes[size_t(id)];
    d->by_id[size_t(id)] = std::string_view(d->blob.data() + at, bytes[size_t(id)].size());
    d->plain_chars[size_t(id)] = plain_chars(d->by_id[size_t(id)]);
    (d->plain_chars[size_t(id)] ? d->plain_ids : d->odd_ids).push_back(id);
  }
  d->sorted_ids = order;
  lay_sorted(d->by_id, order, d->sorted, d->shared);
  lay_sorted(d->by_id, d->odd_ids, d->odd_sorted, d->odd_shared);
  d->kind = std::move(kind);
  return d;
}

}  // namespace

TokenTable TokenTable::from_tokenizer(const Tokenizer& tokenizer, int64_t vocab, std::span<const int64_t> end_ids) {
  if (vocab < 1) fail("token table", "the vocabulary is empty");
  std::vector<std::string> bytes(static_cast<size_t>(vocab));
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
    case TokenKind::Text: {
      const uint8_t chars = data_->plain_chars[size_t(id)];
      if (chars && grammar.free_text_room() >= chars) return true;
      return grammar.can_accept(data_->by_id[size_t(id)]);
    }
    case TokenKind::End: return grammar.complete();
    default: return false;
  }
}

void TokenTable::fill_allowed(const JsonGrammar& grammar, std::span<uint8_t> mask) const {
  const Data& d = *data_;
  if (mask.size() != d.kind.size()) fail("token table", "the mask is not vocabulary-sized");
  std::fill(mask.begin(), mask.end(), 0);
  const size_t room = grammar.free_text_room();
  const bool free_text = room > 0;  // plain tokens that fit are in; only the others are fed
  if (free_text)
    for (int32_t id : d.plain_ids) mask[size_t(id)] = d.plain_chars[size_t(id)] <= room;
  const auto& sorted = free_text ? d.odd_sorted : d.sorted;
  const auto& ids = free_text ? d.odd_ids : d.sorted_ids;
  std::vector<uint8_t> ok(sorted.size());
  grammar.can_accept_sorted(sorted, free_text ? d.odd_shared : d.shared, ok);
  for (size_t i = 0; i < ok.size(); ++i) mask[size_t(ids[i])] = ok[i];
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
