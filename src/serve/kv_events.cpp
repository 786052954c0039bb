#include "serve/kv_events.h"

#include <zmq.h>

#include <chrono>

#include "deltagen/error.h"
#include "serve/msgpack_writer.h"

namespace deltagen::serve {
namespace {

constexpr const char* kMedium = "CPU";  // the snapshots live in host memory (or its spill files)

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A 64-bit finalizer (splitmix64's): every input bit moves every output bit.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The batch around `events` encoded events: [timestamp, [events], nil].
std::string batch(uint32_t count, const std::string& events) {
  MsgpackWriter w;
  w.array(3);
  w.float64(unix_seconds());
  w.array(count);
  std::string out = w.bytes() + events;
  MsgpackWriter rank;
  rank.nil();  // data_parallel_rank: one engine per process
  return out + rank.bytes();
}

}  // namespace

std::vector<uint64_t> KvEventPublisher::block_hashes(std::span<const int64_t> key, int64_t block_size) {
  std::vector<uint64_t> hashes;
  if (block_size < 1) return hashes;
  uint64_t parent = 0x6465'6c74'6167'656eull;  // "deltagen": the chain's start
  for (size_t start = 0; start + size_t(block_size) <= key.size(); start += size_t(block_size)) {
    uint64_t h = mix(parent);
    bool text = true;
    for (size_t i = start; i < start + size_t(block_size); ++i) {
      if (key[i] < 0) text = false;  // an image's key: not a token id a router can match
      h = mix(h ^ uint64_t(key[i]));
    }
    if (!text) break;
    // 63 bits: a consumer that decodes into a signed 64-bit integer reads the same number.
    h &= 0x7fff'ffff'ffff'ffffull;
    hashes.push_back(h);
    parent = h;
  }
  return hashes;
}

KvEventPublisher::KvEventPublisher(KvEventOptions options) : options_(std::move(options)) {
  if (options_.block_size < 1) fail("--block-size", "must be at least 1");
  if (options_.endpoint.empty()) fail("--kv-events", "needs an endpoint, e.g. tcp://127.0.0.1:5557");
  context_ = zmq_ctx_new();
  if (!context_) fail("--kv-events", "cannot start ZeroMQ");
  socket_ = zmq_socket(context_, ZMQ_PUB);
  // A subscriber that does not keep up loses messages (the sequence numbers
  // show the gap) rather than growing this process's memory without bound.
  const int high_water_mark = 100000, linger_ms = 1000;
  if (!socket_ || zmq_setsockopt(socket_, ZMQ_SNDHWM, &high_water_mark, sizeof high_water_mark) != 0 ||
      zmq_setsockopt(socket_, ZMQ_LINGER, &linger_ms, sizeof linger_ms) != 0 ||
      (options_.connect ? zmq_connect(socket_, options_.endpoint.c_str()) : zmq_bind(socket_, options_.endpoint.c_str())) != 0) {
    const std::string why = zmq_strerror(zmq_errno());
    if (socket_) zmq_close(socket_);
    zmq_ctx_term(context_);
    fail("--kv-events " + options_.endpoint, "cannot " + std::string(options_.connect ? "connect" : "bind") + ": " + why);
  }
  endpoint_ = options_.endpoint;
  if (!options_.connect) {
    char resolved[256] = {};
    size_t size = sizeof resolved;
    if (zmq_getsockopt(socket_, ZMQ_LAST_ENDPOINT, resolved, &size) == 0) endpoint_ = resolved;
  }
}

KvEventPublisher::~KvEventPublisher() {
  zmq_close(socket_);  // waits up to the linger time for queued messages
  zmq_ctx_term(context_);
}

int64_t KvEventPublisher::published() const {
  std::lock_guard lock(mutex_);
  return int64_t(sequence_);
}

void KvEventPublisher::send(const std::string& payload) {
  unsigned char sequence[8];
  for (int i = 0; i < 8; ++i) sequence[i] = uint8_t(sequence_ >> (8 * (7 - i)));
  ++sequence_;
  // Never blocks: a PUB socket past its high-water mark drops the message.
  zmq_send(socket_, options_.topic.data(), options_.topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
  zmq_send(socket_, sequence, sizeof sequence, ZMQ_SNDMORE | ZMQ_DONTWAIT);
  zmq_send(socket_, payload.data(), payload.size(), ZMQ_DONTWAIT);
}

void KvEventPublisher::stored(std::span<const int64_t> key) {
  const std::vector<uint64_t> hashes = block_hashes(key, options_.block_size);
  std::lock_guard lock(mutex_);
  MsgpackWriter events;
  uint32_t count = 0;
  // Each run of blocks no other snapshot covered yet is one BlockStored
  // (one run in practice: the covered blocks of every snapshot start at 0).
  for (size_t i = 0; i < hashes.size();) {
    if (snapshots_per_block_[hashes[i]]++ > 0) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < hashes.size() && snapshots_per_block_[hashes[end]] == 0) ++snapshots_per_block_[hashes[end++]];
    events.array(8);
    events.str("BlockStored");
    events.array(uint32_t(end - i));
    for (size_t b = i; b < end; ++b) events.uint(hashes[b]);
    if (i == 0) events.nil();
    else events.uint(hashes[i - 1]);
    const size_t bs = size_t(options_.block_size);
    events.array(uint32_t((end - i) * bs));
    for (size_t t = i * bs; t < end * bs; ++t) events.uint(uint64_t(key[t]));
    events.uint(uint64_t(options_.block_size));
    events.nil();  // lora_id
    events.str(kMedium);
    events.nil();  // lora_name
    ++count;
    i = end;
  }
  if (count > 0) send(batch(count, events.bytes()));
}

void KvEventPublisher::removed(std::span<const int64_t> key) {
  const std::vector<uint64_t> hashes = block_hashes(key, options_.block_size);
  std::lock_guard lock(mutex_);
  std::vector<uint64_t> gone;
  for (uint64_t h : hashes) {
    auto it = snapshots_per_block_.find(h);
    if (it == snapshots_per_block_.end()) continue;
    if (--it->second == 0) {
      snapshots_per_block_.erase(it);
      gone.push_back(h);
    }
  }
  if (gone.empty()) return;
  MsgpackWriter events;
  events.array(3);
  events.str("BlockRemoved");
  events.array(uint32_t(gone.size()));
  for (uint64_t h : gone) events.uint(h);
  events.str(kMedium);
  send(batch(1, events.bytes()));
}

void KvEventPublisher::cleared() {
  std::lock_guard lock(mutex_);
  snapshots_per_block_.clear();
  MsgpackWriter events;
  events.array(1);
  events.str("AllBlocksCleared");
  send(batch(1, events.bytes()));
}

}  // namespace deltagen::serve
