// The prompt cache (runtime/prefix_cache.h): the deepest cached prefix of a
// prompt, the radix tree's edge splits, LRU eviction within the memory
// budget, spilling to disk and reading back, the disk budget, and a spilled
// file that no longer reads. Snapshots are made by hand: the cache only
// looks at their tokens and sizes.
#include "runtime/prefix_cache.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_util.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;

// A snapshot keyed by `tokens`, with `bytes` of state whose content is `fill`.
std::shared_ptr<const StateSnapshot> snap(Ids tokens, size_t bytes = 1000, uint8_t fill = 1) {
  auto s = std::make_shared<StateSnapshot>();
  s->vocab_size = 512;
  s->length = int64_t(tokens.size());
  s->tokens = std::move(tokens);
  CacheSnapshot c;
  c.layer = 0;
  c.kind = CacheKind::RecurrentState;
  c.dims = {1, int64_t(bytes / 4)};
  c.data.assign(bytes, std::byte(fill));
  s->caches.push_back(std::move(c));
  return s;
}

int64_t found_length(PrefixCache& cache, const Ids& prompt) {
  auto s = cache.find(prompt);
  return s ? s->length : -1;
}

TEST(PrefixCache, FindsTheDeepestPrefix) {
  PrefixCache cache;
  cache.insert(snap({1, 2, 3}));
  cache.insert(snap({1, 2, 3, 4, 5}));
  cache.insert(snap({1, 2, 9}));  // splits the edge [1 2 3] at 2
  cache.insert(snap({7}));
  EXPECT_EQ(found_length(cache, {1, 2, 3, 4, 5, 6}), 5);
  EXPECT_EQ(found_length(cache, {1, 2, 3, 4, 5}), 5);  // the whole prompt is a prefix of itself
  EXPECT_EQ(found_length(cache, {1, 2, 3, 4}), 3);     // ends inside an edge: the node above
  EXPECT_EQ(found_length(cache, {1, 2, 9, 9}), 3);
  EXPECT_EQ(found_length(cache, {1, 2}), -1);  // [1 2] is a split point, not an entry
  EXPECT_EQ(found_length(cache, {2, 1}), -1);
  EXPECT_EQ(found_length(cache, {7, 7}), 1);
  EXPECT_EQ(found_length(cache, {}), -1);
  EXPECT_TRUE(cache.contains(Ids{1, 2, 9}));
  EXPECT_FALSE(cache.contains(Ids{1, 2}));
  const PrefixCacheStats s = cache.stats();
  EXPECT_EQ(s.entries, 4);
  EXPECT_EQ(s.lookups, 8);
  EXPECT_EQ(s.hits, 5);
  EXPECT_EQ(s.hit_tokens, 5 + 5 + 3 + 3 + 1);
}

TEST(PrefixCache, TheSameKeyReplacesItsEntry) {
  PrefixCache cache;
  cache.insert(snap({1, 2}, 100, 1));
  cache.insert(snap({1, 2}, 200, 2));
  EXPECT_EQ(cache.stats().entries, 1);
  EXPECT_EQ(cache.find(Ids{1, 2, 3})->caches[0].data.size(), 200u);
  EXPECT_EQ(cache.stats().memory_bytes, 200 + 16);
}

TEST(PrefixCache, RefusesPendingTokens) {
  PrefixCache cache;
  auto s = std::make_shared<StateSnapshot>(*snap({1, 2}));
  s->tokens.push_back(3);  // pending
  EXPECT_THROW(cache.insert(s), Error);
}

TEST(PrefixCache, EvictsTheLeastRecentlyUsedPastTheBudget) {
  // Each entry: 1000 bytes of state + its tokens; room for two.
  PrefixCache cache(PrefixCacheOptions{.memory_bytes = 2100});
  cache.insert(snap({1}));
  cache.insert(snap({2}));
  EXPECT_EQ(found_length(cache, {1, 5}), 1);  // [1] is now the most recently used
  cache.insert(snap({3}));                    // evicts [2]
  EXPECT_EQ(found_length(cache, {2}), -1);
  EXPECT_EQ(found_length(cache, {1}), 1);
  EXPECT_EQ(found_length(cache, {3}), 1);
  EXPECT_EQ(cache.stats().entries, 2);
  EXPECT_EQ(cache.stats().evictions, 1);
  // A snapshot larger than the whole budget is not kept and evicts nothing.
  cache.insert(snap({4}, 5000));
  EXPECT_EQ(cache.stats().entries, 2);
  EXPECT_FALSE(cache.contains(Ids{4}));
}

TEST(PrefixCache, SpillsToDiskAndReadsBack) {
  test::TempDir dir;
  PrefixCache cache(PrefixCacheOptions{.memory_bytes = 2100, .spill_dir = dir / "spill", .disk_bytes = 1 << 20});
  cache.insert(snap({1, 1}, 1000, 11));
  cache.insert(snap({2, 2}, 1000, 22));
  cache.insert(snap({3, 3}, 1000, 33));  // [1 1] goes to disk
  PrefixCacheStats s = cache.stats();
  EXPECT_EQ(s.entries, 2);
  EXPECT_EQ(s.disk_entries, 1);
  EXPECT_EQ(s.spills, 1);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "spill"), fs::directory_iterator()), 1);

  auto back = cache.find(Ids{1, 1, 5});  // read back from disk, exactly
  ASSERT_TRUE(back);
  EXPECT_EQ(back->tokens, (Ids{1, 1}));
  EXPECT_EQ(back->caches[0].data, std::vector<std::byte>(1000, std::byte(11)));
  s = cache.stats();
  EXPECT_EQ(s.disk_loads, 1);
  EXPECT_EQ(s.entries, 2);  // [1 1] is in memory again; [2 2] went to disk in its place
  EXPECT_EQ(s.disk_entries, 2);
}

TEST(PrefixCache, TheDiskBudgetDropsTheOldestFiles) {
  test::TempDir dir;
  // Memory for one entry, disk for one more.
  PrefixCache cache(PrefixCacheOptions{.memory_bytes = 1100, .spill_dir = dir.path(), .disk_bytes = 1100});
  cache.insert(snap({1}));
  cache.insert(snap({2}));  // [1] to disk
  cache.insert(snap({3}));  // [2] to disk, [1] dropped
  EXPECT_EQ(found_length(cache, {1}), -1);
  EXPECT_EQ(cache.stats().disk_entries, 1);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(PrefixCache, ASpilledFileThatNoLongerReadsFallsBackToAShallowerEntry) {
  test::TempDir dir;
  PrefixCache cache(PrefixCacheOptions{.memory_bytes = 1100, .spill_dir = dir.path(), .disk_bytes = 1 << 20});
  cache.insert(snap({1}));
  cache.insert(snap({1, 2}));  // [1] to disk
  cache.insert(snap({9}));     // [1 2] to disk
  for (const auto& f : fs::directory_iterator(dir.path())) std::ofstream(f.path(), std::ios::trunc) << "garbage";
  EXPECT_EQ(found_length(cache, {1, 2, 3}), -1);  // both files are corrupt: both dropped
  EXPECT_EQ(cache.stats().disk_entries, 0);
  EXPECT_EQ(found_length(cache, {9}), 1);
}

TEST(PrefixCache, RemovesItsSpillFilesWhenDestroyed) {
  test::TempDir dir;
  {
    PrefixCache cache(PrefixCacheOptions{.memory_bytes = 1100, .spill_dir = dir.path(), .disk_bytes = 1 << 20});
    cache.insert(snap({1}));
    cache.insert(snap({2}));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 0);
}

}  // namespace
}  // namespace deltagen
