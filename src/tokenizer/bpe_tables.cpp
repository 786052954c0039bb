#include "tokenizer/bpe_tables.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>

namespace deltagen::tok {

// ---- MergeTable ---------------------------------------------------------------------

MergeTable::MergeTable(size_t expected_entries) {
  // At most half full keeps linear probing short.
  size_t slots = std::bit_ceil(std::max<size_t>(16, expected_entries * 2));
  slots_.assign(slots, Slot{});
  shift_ = 64 - std::countr_zero(slots);
}

void MergeTable::insert(int32_t left, int32_t right, Merge merge) {
  uint64_t key = key_of(left, right);
  size_t mask = slots_.size() - 1;
  for (size_t i = home(key);; i = (i + 1) & mask) {
    if (slots_[i].key == key) return;
    if (slots_[i].key == kEmpty) {
      slots_[i] = {key, merge};
      return;
    }
  }
}

const MergeTable::Merge* MergeTable::find(int32_t left, int32_t right) const {
  uint64_t key = key_of(left, right);
  size_t mask = slots_.size() - 1;
  for (size_t i = home(key);; i = (i + 1) & mask) {
    if (slots_[i].key == key) return &slots_[i].merge;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

// ---- WordCache ----------------------------------------------------------------------

namespace {
uint64_t hash_word(std::string_view word) { return std::hash<std::string_view>()(word); }
}  // namespace

std::optional<std::span<const int32_t>> WordCache::find(std::string_view word) const {
  if (slots_.empty() || word.empty()) return std::nullopt;
  uint64_t h = hash_word(word);
  size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.key_length == 0) return std::nullopt;
    if (s.hash == h && s.key_length == word.size() &&
        std::memcmp(keys_.data() + s.key_offset, word.data(), word.size()) == 0)
      return std::span<const int32_t>(ids_.data() + s.ids_offset, s.id_count);
  }
}

void WordCache::insert(std::string_view word, std::span<const int32_t> ids) {
  if (word.empty() || word.size() > UINT16_MAX || ids.size() > UINT16_MAX) return;
  if (slots_.empty()) clear(kInitialSlots);
  if ((entries_ + 1) * 2 > slots_.size()) grow();
  uint64_t h = hash_word(word);
  size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i].key_length != 0) i = (i + 1) & mask;
  slots_[i] = {h, uint32_t(keys_.size()), uint32_t(ids_.size()), uint16_t(word.size()), uint16_t(ids.size())};
  keys_.append(word);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  ++entries_;
}

void WordCache::clear(size_t slots) {
  slots_.assign(slots, Slot{});
  keys_.clear();
  ids_.clear();
  entries_ = 0;
}

// Doubles the table, or starts over once it has reached its size limit.
void WordCache::grow() {
  if (slots_.size() >= kMaxSlots) {
    clear(slots_.size());
    return;
  }
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.size() * 2, Slot{});
  size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key_length == 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].key_length != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace deltagen::tok
