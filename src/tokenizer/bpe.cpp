#include "tokenizer/bpe.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "deltagen/error.h"

namespace deltagen::tok {
namespace {

// Longer pre-tokens rarely repeat; caching them would only cost memory.
constexpr size_t kMaxCachedWordBytes = 256;

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

// A possible merge of the symbol at `pos` with the one after it.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t left_id, right_id, merged_id;
  // Lowest rank first; among equal ranks the leftmost, as HF's BPE does.
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

void require_supported_options(const nlohmann::json& model, const std::string& where) {
  auto set_and_true = [&](const char* key) {
    return model.contains(key) && model[key].is_boolean() && model[key].get<bool>();
  };
  auto non_empty = [&](const char* key) {
    return model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty();
  };
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
    fail(where, "BPE dropout is not supported");
  if (set_and_true("byte_fallback")) fail(where, "BPE byte_fallback is not supported");
  if (non_empty("continuing_subword_prefix") || non_empty("end_of_word_suffix"))
    fail(where, "BPE continuing_subword_prefix / end_of_word_suffix are not supported");
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, const std::string& where) {
  std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") fail(where, "model type '" + type + "' is not supported (only BPE)");
  require_supported_options(model, where);
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail(where, "model.vocab: missing or not an object");
  if (!model.contains("merges") || !model["merges"].is_array()) fail(where, "model.merges: missing or not an array");
  load_vocab(model["vocab"], where);
  load_merges(model["merges"], where);
  ignore_merges_ = model.value("ignore_merges", false);
  fuse_unk_ = model.value("fuse_unk", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto unk = find(model["unk_token"].get<std::string>());
    if (!unk) fail(where, "model.unk_token '" + model["unk_token"].get<std::string>() + "' is not in the vocabulary");
    unk_id_ = int32_t(*unk);
  }
}

void BpeModel::load_vocab(const nlohmann::json& vocab, const std::string& where) {
  id_by_bytes_.reserve(vocab.size());
  for (const auto& [text, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || id_json.get<int64_t>() >= kMaxTokenIds)
      fail(where, "model.vocab['" + text + "']: id is not an integer in [0, " + std::to_string(kMaxTokenIds) + ")");
    auto id = int32_t(id_json.get<int64_t>());
    if (size_t(id) >= tokens_.size()) tokens_.resize(size_t(id) + 1);
    Token& t = tokens_[size_t(id)];
    if (t.present) fail(where, "model.vocab: id " + std::to_string(id) + " is used twice");
    t.present = true;
    if (auto bytes = byte_level_to_bytes(text)) {
      t.bytes = std::move(*bytes);
      id_by_bytes_.emplace(t.bytes, id);
    } else {
      t.bytes = text;
      t.byte_level = false;
      id_by_other_text_.emplace(text, id);
    }
  }
  std::fill(std::begin(byte_id_), std::end(byte_id_), kUnknown);
  for (int b = 0; b < 256; ++b) {
    auto it = id_by_bytes_.find(std::string(1, char(b)));
    if (it != id_by_bytes_.end()) byte_id_[b] = it->second;
  }
}

void BpeModel::load_merges(const nlohmann::json& merges, const std::string& where) {
  merges_ = MergeTable(merges.size());
  int32_t rank = 0;
  for (const auto& m : merges) {
    std::string left, right;
    if (m.is_string()) {  // older files: "left right"
      const auto& s = m.get_ref<const std::string&>();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        fail(where, "model.merges[" + std::to_string(rank) + "]: expected \"left right\", got '" + s + "'");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      fail(where, "model.merges[" + std::to_string(rank) + "]: expected a pair of strings");
    }
    auto l = find(left), r = find(right), merged = find(left + right);
    if (!l || !r || !merged)
      fail(where, "model.merges[" + std::to_string(rank) + "]: '" + left + "' + '" + right +
                      "' uses a token that is not in the vocabulary");
    merges_.insert(int32_t(*l), int32_t(*r), {rank, int32_t(*merged)});
    ++rank;
  }
}

std::optional<int64_t> BpeModel::find(std::string_view token_string) const {
  if (auto bytes = byte_level_to_bytes(token_string)) {
    auto it = id_by_bytes_.find(*bytes);
    if (it != id_by_bytes_.end()) return it->second;
    return std::nullopt;
  }
  auto it = id_by_other_text_.find(std::string(token_string));
  if (it != id_by_other_text_.end()) return it->second;
  return std::nullopt;
}

std::string BpeModel::token_string(int64_t id) const {
  const Token& t = tokens_[size_t(id)];
  return t.byte_level ? bytes_to_byte_level(t.bytes) : t.bytes;
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& ids) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;  // a min-heap, via std::push_heap with std::greater
  const auto n = int32_t(word.size());
  symbols.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i)
    symbols[size_t(i)] = {byte_id_[static_cast<unsigned char>(word[size_t(i)])], i - 1, i + 1 < n ? i + 1 : -1, true};

  heap.clear();
  auto consider_pair = [&](int32_t pos) {
    const Symbol& left = symbols[size_t(pos)];
    if (left.next < 0) return;
    const Symbol& right = symbols[size_t(left.next)];
    if (left.id == kUnknown || right.id == kUnknown) return;
    const MergeTable::Merge* merge = merges_.find(left.id, right.id);
    if (!merge) return;
    heap.push_back({merge->rank, pos, left.id, right.id, merge->merged_id});
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider_pair(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[size_t(c.pos)];
    // Skip candidates that earlier merges made stale.
    if (!left.alive || left.id != c.left_id || left.next < 0 || symbols[size_t(left.next)].id != c.right_id) continue;
    Symbol& right = symbols[size_t(left.next)];
    right.alive = false;
    left.id = c.merged_id;
    left.next = right.next;
    if (left.next >= 0) symbols[size_t(left.next)].prev = c.pos;
    if (left.prev >= 0) consider_pair(left.prev);
    consider_pair(c.pos);
  }

  ids.clear();
  for (int32_t i = 0; i >= 0; i = symbols[size_t(i)].next) ids.push_back(symbols[size_t(i)].id);
}

void BpeModel::append_ids(std::span<const int32_t> ids, std::vector<int64_t>& out) const {
  bool last_was_unk = false;
  for (int32_t id : ids) {
    if (id != kUnknown) {
      out.push_back(id);
      last_was_unk = false;
    } else if (unk_id_ && !(fuse_unk_ && last_was_unk)) {  // without an unk token, unknown bytes vanish (as in HF)
      out.push_back(*unk_id_);
      last_was_unk = true;
    }
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    int32_t id = byte_id_[static_cast<unsigned char>(word[0])];
    append_ids(std::span(&id, 1), out);
    return;
  }
  if (ignore_merges_) {
    auto it = id_by_bytes_.find(std::string(word));
    if (it != id_by_bytes_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (auto cached = cache_.find(word)) {
      append_ids(*cached, out);
      return;
    }
  }
  thread_local std::vector<int32_t> ids;
  merge_word(word, ids);
  append_ids(ids, out);
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    cache_.insert(word, ids);
  }
}

}  // namespace deltagen::tok
