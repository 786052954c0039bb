#include "runtime/prefix_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "deltagen/error.h"

namespace deltagen {
namespace fs = std::filesystem;

int64_t snapshot_bytes(const StateSnapshot& snapshot) {
  int64_t bytes = int64_t(snapshot.tokens.size() * sizeof(int64_t));
  for (const CacheSnapshot& c : snapshot.caches) bytes += int64_t(c.data.size());
  return bytes;
}

std::vector<int64_t> prefix_key(std::span<const int64_t> tokens, std::span<const SnapshotImage> images) {
  std::vector<int64_t> key(tokens.begin(), tokens.end());
  for (const SnapshotImage& image : images) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 of the hash text
    for (unsigned char c : image.pixel_hash) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    const int64_t id = -1 - int64_t(h >> 2);
    const int64_t begin = std::max<int64_t>(0, image.start);
    const int64_t end = std::min<int64_t>(int64_t(key.size()), image.start + image.tokens);
    for (int64_t i = begin; i < end; ++i) key[size_t(i)] = id;
  }
  return key;
}

// A radix-tree node: `edge` is the run of tokens from its parent to it.
struct PrefixCache::Node {
  std::vector<int64_t> edge;
  Node* parent = nullptr;
  std::map<int64_t, std::unique_ptr<Node>> children;  // keyed by their edge's first token
  std::unique_ptr<Entry> entry;
};

// A snapshot stored at a node: in memory, in a spill file, or both (a spilled
// snapshot read back keeps its file, so dropping it again costs no write).
struct PrefixCache::Entry {
  Node* node = nullptr;
  int64_t length = 0;
  int64_t bytes = 0;
  std::shared_ptr<const StateSnapshot> memory;
  fs::path file;
  std::list<Entry*>::iterator lru;
};

PrefixCache::PrefixCache(PrefixCacheOptions options) : options_(std::move(options)), root_(std::make_unique<Node>()) {
  if (options_.memory_bytes < 0 || options_.disk_bytes < 0) fail("prefix cache", "budgets must not be negative");
  if (!options_.spill_dir.empty()) {
    std::error_code ec;
    fs::create_directories(options_.spill_dir, ec);
    if (ec || !fs::is_directory(options_.spill_dir))
      fail(options_.spill_dir.string(), "cannot create the cache folder");
  }
}

PrefixCache::~PrefixCache() {
  std::error_code ec;
  for (Entry* e : lru_)
    if (!e->file.empty()) fs::remove(e->file, ec);
}

PrefixCache::Node* PrefixCache::node_for(std::span<const int64_t> tokens) {
  Node* node = root_.get();
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->edge.assign(tokens.begin() + ptrdiff_t(pos), tokens.end());
      leaf->parent = node;
      Node* raw = leaf.get();
      node->children.emplace(tokens[pos], std::move(leaf));
      return raw;
    }
    Node* child = it->second.get();
    const std::span<const int64_t> rest = tokens.subspan(pos);
    const auto [edge_end, rest_end] = std::mismatch(child->edge.begin(), child->edge.end(), rest.begin(), rest.end());
    const size_t matched = size_t(edge_end - child->edge.begin());
    if (matched < child->edge.size()) {
      // Split the edge: node -> middle (the matched part) -> child (the rest).
      auto middle = std::make_unique<Node>();
      middle->edge.assign(child->edge.begin(), child->edge.begin() + ptrdiff_t(matched));
      middle->parent = node;
      std::unique_ptr<Node> moved = std::move(it->second);
      moved->edge.erase(moved->edge.begin(), moved->edge.begin() + ptrdiff_t(matched));
      moved->parent = middle.get();
      middle->children.emplace(moved->edge.front(), std::move(moved));
      child = middle.get();
      it->second = std::move(middle);
    }
    node = child;
    pos += matched;
  }
  return node;
}

const PrefixCache::Node* PrefixCache::find_node(std::span<const int64_t> tokens) const {
  const Node* node = root_.get();
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) return nullptr;
    const Node* child = it->second.get();
    if (child->edge.size() > tokens.size() - pos ||
        !std::equal(child->edge.begin(), child->edge.end(), tokens.begin() + ptrdiff_t(pos)))
      return nullptr;
    node = child;
    pos += child->edge.size();
  }
  return node;
}

void PrefixCache::touch(Entry& entry) {
  lru_.splice(lru_.begin(), lru_, entry.lru);
}

std::shared_ptr<const StateSnapshot> PrefixCache::find(std::span<const int64_t> tokens) {
  std::lock_guard lock(mutex_);
  ++stats_.lookups;
  // Every entry on the prompt's path, deepest last.
  std::vector<Entry*> path;
  const Node* node = root_.get();
  size_t pos = 0;
  while (pos < tokens.size()) {
    auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) break;
    const Node* child = it->second.get();
    if (child->edge.size() > tokens.size() - pos ||
        !std::equal(child->edge.begin(), child->edge.end(), tokens.begin() + ptrdiff_t(pos)))
      break;
    pos += child->edge.size();
    node = child;
    if (node->entry) path.push_back(node->entry.get());
  }
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    Entry& entry = **it;
    if (!entry.memory) {
      try {
        entry.memory = std::make_shared<const StateSnapshot>(load_snapshot_file(entry.file));
        stats_.memory_bytes += entry.bytes;
        ++stats_.entries;
        ++stats_.disk_loads;
      } catch (const Error& e) {
        std::fprintf(stderr, "prefix cache: dropping a spilled snapshot: %s\n", e.what());
        erase(entry);
        continue;
      }
    }
    std::shared_ptr<const StateSnapshot> found = entry.memory;
    touch(entry);
    ++stats_.hits;
    stats_.hit_tokens += entry.length;
    enforce_budgets();  // a snapshot read back counts against the memory budget again
    return found;
  }
  return nullptr;
}

bool PrefixCache::contains(std::span<const int64_t> tokens) const {
  std::lock_guard lock(mutex_);
  const Node* node = find_node(tokens);
  return node && node->entry;
}

void PrefixCache::insert(std::shared_ptr<const StateSnapshot> snapshot) {
  if (!snapshot) fail("prefix cache", "no snapshot");
  if (int64_t(snapshot->tokens.size()) != snapshot->length)
    fail("prefix cache", "a cached snapshot must not hold pending tokens");
  const int64_t bytes = snapshot_bytes(*snapshot);
  const std::vector<int64_t> key = prefix_key(snapshot->tokens, snapshot->images);
  std::lock_guard lock(mutex_);
  if (snapshot->length == 0 || bytes > options_.memory_bytes) return;
  Node* node = node_for(key);
  if (node->entry) {
    erase(*node->entry);   // which may prune `node` away:
    node = node_for(key);  // find (or make) it again
  }
  auto entry = std::make_unique<Entry>();
  entry->node = node;
  entry->length = snapshot->length;
  entry->bytes = bytes;
  entry->memory = std::move(snapshot);
  lru_.push_front(entry.get());
  entry->lru = lru_.begin();
  node->entry = std::move(entry);
  stats_.memory_bytes += bytes;
  ++stats_.entries;
  ++stats_.inserts;
  if (options_.listener) options_.listener->stored(key);
  enforce_budgets();
}

void PrefixCache::spill(Entry& entry) {
  if (entry.file.empty()) {
    const fs::path file =
        options_.spill_dir / ("p" + std::to_string(getpid()) + "-" + std::to_string(next_file_++) + ".dgstate");
    try {
      save_snapshot_file(*entry.memory, file);
    } catch (const Error& e) {
      std::fprintf(stderr, "prefix cache: cannot spill a snapshot, dropping it: %s\n", e.what());
      erase(entry);
      return;
    }
    entry.file = file;
    stats_.disk_bytes += entry.bytes;
    ++stats_.disk_entries;
    ++stats_.spills;
  }
  entry.memory.reset();
  stats_.memory_bytes -= entry.bytes;
  --stats_.entries;
}

void PrefixCache::enforce_budgets() {
  // The least recently used entry that `holds` something.
  auto oldest = [this](auto holds) -> Entry* {
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it)
      if (holds(**it)) return *it;
    return nullptr;
  };
  // Past the memory budget, snapshots go to disk (or away) ...
  while (stats_.memory_bytes > options_.memory_bytes) {
    Entry* e = oldest([](const Entry& x) { return bool(x.memory); });
    if (!e) break;
    ++stats_.evictions;
    if (options_.spill_dir.empty()) erase(*e);
    else spill(*e);
  }
  // ... and past the disk budget, files that are not also in memory go.
  while (stats_.disk_bytes > options_.disk_bytes) {
    Entry* e = oldest([](const Entry& x) { return !x.file.empty() && !x.memory; });
    if (!e) break;
    erase(*e);
  }
}

void PrefixCache::erase(Entry& entry) {
  if (entry.memory) {
    stats_.memory_bytes -= entry.bytes;
    --stats_.entries;
  }
  if (!entry.file.empty()) {
    std::error_code ec;
    fs::remove(entry.file, ec);
    stats_.disk_bytes -= entry.bytes;
    --stats_.disk_entries;
  }
  lru_.erase(entry.lru);
  Node* node = entry.node;
  if (options_.listener) options_.listener->removed(key_of(node));
  node->entry.reset();  // `entry` is gone from here on
  // Prune the branch that no longer leads to any entry.
  while (node != root_.get() && !node->entry && node->children.empty()) {
    Node* parent = node->parent;
    parent->children.erase(node->edge.front());
    node = parent;
  }
}

std::vector<int64_t> PrefixCache::key_of(const Node* node) const {
  std::vector<const Node*> path;
  for (; node && node != root_.get(); node = node->parent) path.push_back(node);
  std::vector<int64_t> key;
  for (auto it = path.rbegin(); it != path.rend(); ++it) key.insert(key.end(), (*it)->edge.begin(), (*it)->edge.end());
  return key;
}

void PrefixCache::clear() {
  std::lock_guard lock(mutex_);
  std::error_code ec;
  for (Entry* e : lru_)
    if (!e->file.empty()) fs::remove(e->file, ec);
  lru_.clear();
  root_ = std::make_unique<Node>();  // every entry goes with its node
  stats_.entries = stats_.memory_bytes = stats_.disk_entries = stats_.disk_bytes = 0;
  if (options_.listener) options_.listener->cleared();
}

PrefixCacheStats PrefixCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace deltagen
