// A cache of hybrid-state snapshots keyed by the tokens they hold, so that a
// request whose prompt starts with an earlier request's tokens restores that
// state and runs only the rest.
//
// Why snapshots and not a KV prefix: the linear-attention layers keep one
// recurrent state per sequence, which cannot be rolled back to an earlier
// position (llama-server's "forcing full prompt re-processing" on hybrid
// models). A KV cache could be cut at any position; a recurrent state only
// exists where it was copied. So the server copies the whole state at the
// positions the next request is likely to share (message boundaries, every K
// tokens of a long prompt) and looks up the deepest copy that is a prefix of
// a new prompt.
//
// Images: a prefix's key is its tokens with every image's pad tokens
// replaced by an id made from that image's pixel hash (prefix_key), so two
// prompts with the same tokens but other images share the states before the
// first differing image and none after it.
//
// The keys live in a radix tree (edges are runs of tokens), so a lookup walks
// the prompt once. Memory is bounded: past `memory_bytes` the least recently
// used snapshots are written to `spill_dir` (when given, bounded by
// `disk_bytes`) or dropped. Thread-safe (one mutex): the scheduler inserts
// and looks up, /metrics reads the stats.
#pragma once
#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "runtime/snapshot.h"

namespace deltagen {

// Told where the cache gains or loses a prefix (serve --kv-events publishes
// it for routers). Called with the cache's lock held, from whichever thread
// changed the cache: it must be quick and must not call back into the cache.
// A key is the whole prefix, prefix_key of its tokens.
class PrefixCacheListener {
 public:
  virtual ~PrefixCacheListener() = default;
  virtual void stored(std::span<const int64_t> key) = 0;
  virtual void removed(std::span<const int64_t> key) = 0;  // evicted (memory and disk) or replaced
  virtual void cleared() = 0;                              // every entry dropped at once (clear())
};

struct PrefixCacheOptions {
  int64_t memory_bytes = int64_t(4096) << 20;  // snapshots held in memory
  std::filesystem::path spill_dir;             // empty: evicted snapshots are dropped
  int64_t disk_bytes = int64_t(16384) << 20;   // snapshots held in spill_dir
  std::shared_ptr<PrefixCacheListener> listener;  // null: nobody is told
};

struct PrefixCacheStats {
  int64_t entries = 0, memory_bytes = 0;  // in memory
  int64_t disk_entries = 0, disk_bytes = 0;
  int64_t lookups = 0, hits = 0;
  int64_t hit_tokens = 0;  // tokens restored instead of run, over all hits
  int64_t inserts = 0, evictions = 0, spills = 0, disk_loads = 0;
};

// Bytes a snapshot occupies in memory: its state tensors and its tokens.
int64_t snapshot_bytes(const StateSnapshot& snapshot);

// The key of a prefix: `tokens` with tokens [start, start + tokens) of each
// image replaced by a negative id derived from its pixel_hash (real ids are
// never negative). Text-only prefixes are their own keys.
std::vector<int64_t> prefix_key(std::span<const int64_t> tokens, std::span<const SnapshotImage> images);

class PrefixCache {
 public:
  explicit PrefixCache(PrefixCacheOptions options = {});
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The snapshot holding the longest prefix of `key` (prefix_key of a
  // prompt; its length <= key.size()), or null. A snapshot spilled to disk is read back (and
  // dropped, with a note on stderr, when the file no longer reads).
  std::shared_ptr<const StateSnapshot> find(std::span<const int64_t> key);

  // Stores `snapshot` under prefix_key(its run tokens, its images) (pending
  // tokens are not part of the key; it must have none). An entry with the same key is
  // replaced. A snapshot larger than the whole memory budget is not kept.
  void insert(std::shared_ptr<const StateSnapshot> snapshot);

  // Whether an entry has exactly this key (for tests and for skipping a copy
  // the cache already has).
  bool contains(std::span<const int64_t> key) const;

  // Drops every entry (and its spill file); the listener hears cleared().
  void clear();

  PrefixCacheStats stats() const;
  const PrefixCacheOptions& options() const { return options_; }

 private:
  struct Node;
  struct Entry;

  // The node whose path spells `tokens`, made (splitting an edge if need be) when missing.
  Node* node_for(std::span<const int64_t> tokens);
  // The same without making anything: null when there is no such node.
  const Node* find_node(std::span<const int64_t> tokens) const;
  void touch(Entry& entry);
  void enforce_budgets();
  void spill(Entry& entry);
  void erase(Entry& entry);
  // The key a node spells, from the root.
  std::vector<int64_t> key_of(const Node* node) const;

  PrefixCacheOptions options_;
  mutable std::mutex mutex_;
  std::unique_ptr<Node> root_;
  std::list<Entry*> lru_;  // most recently used first; every entry, in memory or on disk
  PrefixCacheStats stats_;
  int64_t next_file_ = 0;
};

}  // namespace deltagen
