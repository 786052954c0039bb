// serve --kv-events ENDPOINT: the prompt cache's changes published over
// ZeroMQ in vLLM's KV-event wire format, so a router that routes by prefix
// (llm-d's precise prefix-cache scorer) knows what each replica holds.
//
// Wire format (docs/scale-out.md says what was checked against upstream):
// a PUB socket sends multipart messages [topic, sequence number as 8 bytes
// big-endian, payload]; the payload is a MessagePack array
//   [timestamp (float seconds), [event, ...], data_parallel_rank (nil)]
// and each event an array tagged by its name:
//   ["BlockStored", [block hashes], parent hash or nil, [token ids], block size, nil (lora id), "CPU", nil (lora name)]
//   ["BlockRemoved", [block hashes], "CPU"]
//   ["AllBlocksCleared"]
//
// Blocks: deltagen's cache holds whole-state snapshots at chosen positions,
// not KV blocks. A snapshot of n tokens is announced as its first
// floor(n / block_size) blocks of block_size tokens; a block is stored while
// at least one snapshot covers it (a count per block) and removed when the
// last one goes. A block's hash chains its parent's hash and its tokens, as
// vLLM's do, so equal prefixes give equal hashes. Blocks stop at the first
// image (its keys are not token ids).
#pragma once
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/prefix_cache.h"

namespace deltagen::serve {

struct KvEventOptions {
  std::string endpoint;  // e.g. tcp://127.0.0.1:5557 (a port of * takes any free one)
  bool connect = false;  // connect to a subscriber that binds, instead of binding
  std::string topic;     // the first part of every message
  int64_t block_size = 16;
};

class KvEventPublisher : public PrefixCacheListener {
 public:
  // Opens the socket; throws Error naming the endpoint when it cannot.
  explicit KvEventPublisher(KvEventOptions options);
  ~KvEventPublisher() override;
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Where it listens (the port chosen for a *), or the endpoint it connected to.
  const std::string& endpoint() const { return endpoint_; }
  const KvEventOptions& options() const { return options_; }
  int64_t published() const;  // messages sent so far

  void stored(std::span<const int64_t> key) override;
  void removed(std::span<const int64_t> key) override;
  void cleared() override;

  // The hashes of the whole blocks at the start of `key` (before its first
  // image), chained: each depends on every token before its end.
  static std::vector<uint64_t> block_hashes(std::span<const int64_t> key, int64_t block_size);

 private:
  void send(const std::string& payload);  // with mutex_ held

  KvEventOptions options_;
  std::string endpoint_;
  void* context_ = nullptr;
  void* socket_ = nullptr;
  mutable std::mutex mutex_;
  uint64_t sequence_ = 0;
  std::unordered_map<uint64_t, int64_t> snapshots_per_block_;
};

}  // namespace deltagen::serve
