// Flat open-addressing hash tables for the BPE hot paths. std::unordered_map
// costs about three dependent cache misses per lookup (bucket, node before,
// node); these cost about one, which matters when a text brings many words
// the cache has not seen yet.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deltagen::tok {

// (left id, right id) -> (rank, merged id).
class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };

  explicit MergeTable(size_t expected_entries = 0);
  // Keeps the first merge given for a pair.
  void insert(int32_t left, int32_t right, Merge merge);
  const Merge* find(int32_t left, int32_t right) const;

 private:
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // ids are < 2^31, so no pair has this key
  static uint64_t key_of(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }
  size_t home(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }

  std::vector<Slot> slots_;
  int shift_;  // 64 - log2(slots_.size())
};

// Pre-token bytes -> ids, bounded: when full it starts over. Keys and ids
// live in two arenas, so an entry costs no allocation. Not thread-safe.
class WordCache {
 public:
  // The cached ids of `word`, or nullopt. The span is valid until the next insert.
  std::optional<std::span<const int32_t>> find(std::string_view word) const;
  void insert(std::string_view word, std::span<const int32_t> ids);

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0, ids_offset = 0;
    uint16_t key_length = 0, id_count = 0;  // key_length 0: empty (empty words are never cached)
  };
  static constexpr size_t kInitialSlots = 1 << 14;
  static constexpr size_t kMaxSlots = 1 << 20;  // at most half full: ~500k words, ~30 MB

  void clear(size_t slots);
  void grow();

  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t entries_ = 0;
};

}  // namespace deltagen::tok
