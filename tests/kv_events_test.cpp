// serve --kv-events without a model: the hand-written MessagePack forms read
// back by an independent reader (msgpack-cxx), the block hashes' chaining,
// the prompt cache telling its listener what it stores, evicts and clears,
// and the publisher's messages over a real ZeroMQ socket on loopback
// (tests/serve_scale_out_test.cpp checks the same against a live server).
#include <msgpack.hpp>  // MSGPACK_NO_BOOST: CMakeLists.txt
#include <zmq.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "deltagen/error.h"
#include "runtime/prefix_cache.h"
#include "serve/kv_events.h"
#include "serve/msgpack_writer.h"

namespace deltagen {
namespace {

using serve::KvEventOptions;
using serve::KvEventPublisher;
using serve::MsgpackWriter;
using Ids = std::vector<int64_t>;

TEST(KvEvents, MsgpackWriterIsReadBackByMsgpackCxx) {
  const std::vector<int64_t> ints = {0, 1, 127, 128, 255, 256, 65535, 65536, (int64_t(1) << 32) - 1, int64_t(1) << 32,
                                     std::numeric_limits<int64_t>::max(), -1, -32, -33, -128, -129, -32768, -32769,
                                     int64_t(INT32_MIN), int64_t(INT32_MIN) - 1, std::numeric_limits<int64_t>::min()};
  const std::vector<std::string> strings = {"", "BlockStored", std::string(31, 'a'), std::string(32, 'b'),
                                            std::string(255, 'c'), std::string(256, 'd'), std::string(70000, 'e')};
  MsgpackWriter w;
  w.array(uint32_t(ints.size() + strings.size() + 4));
  for (int64_t v : ints) w.integer(v);
  for (const std::string& s : strings) w.str(s);
  w.nil();
  w.float64(1733600000.25);
  w.uint(std::numeric_limits<uint64_t>::max());
  w.array(20);  // past the fixarray form
  for (int i = 0; i < 20; ++i) w.uint(uint64_t(i));

  const msgpack::object_handle handle = msgpack::unpack(w.bytes().data(), w.bytes().size());
  const msgpack::object& o = handle.get();
  ASSERT_EQ(o.type, msgpack::type::ARRAY);
  ASSERT_EQ(o.via.array.size, ints.size() + strings.size() + 4);
  size_t k = 0;
  for (int64_t v : ints) EXPECT_EQ(o.via.array.ptr[k++].as<int64_t>(), v);
  for (const std::string& s : strings) EXPECT_EQ(o.via.array.ptr[k++].as<std::string>(), s);
  EXPECT_EQ(o.via.array.ptr[k++].type, msgpack::type::NIL);
  EXPECT_EQ(o.via.array.ptr[k].type, msgpack::type::FLOAT64);
  EXPECT_EQ(o.via.array.ptr[k++].as<double>(), 1733600000.25);
  EXPECT_EQ(o.via.array.ptr[k++].as<uint64_t>(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(o.via.array.ptr[k].as<std::vector<int>>().size(), 20u);
  EXPECT_EQ(o.via.array.ptr[k].as<std::vector<int>>()[19], 19);
}

TEST(KvEvents, BlockHashesChainTheirPrefix) {
  Ids a(40), b(40);
  for (int i = 0; i < 40; ++i) a[size_t(i)] = b[size_t(i)] = 1000 + i;
  b[20] = 7;  // differs in the second block
  const auto ha = KvEventPublisher::block_hashes(a, 16), hb = KvEventPublisher::block_hashes(b, 16);
  ASSERT_EQ(ha.size(), 2u);  // whole blocks only: 40 tokens are two blocks of 16
  ASSERT_EQ(hb.size(), 2u);
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]);
  // A block's hash depends on the blocks before it, not only its own tokens.
  Ids c(a.begin() + 16, a.begin() + 32);
  EXPECT_NE(KvEventPublisher::block_hashes(c, 16)[0], ha[1]);
  for (uint64_t h : ha) EXPECT_LT(h, uint64_t(1) << 63);
  // An image's keys (negative) end the blocks a router can match.
  Ids d = a;
  d[18] = -5;
  EXPECT_EQ(KvEventPublisher::block_hashes(d, 16).size(), 1u);
  EXPECT_TRUE(KvEventPublisher::block_hashes(Ids(15, 3), 16).empty());
}

// What a listener heard, in order: "+N" stored a key of N tokens, "-N" removed, "clear".
struct Recorder : PrefixCacheListener {
  std::vector<std::string> heard;
  void stored(std::span<const int64_t> key) override { heard.push_back("+" + std::to_string(key.size())); }
  void removed(std::span<const int64_t> key) override { heard.push_back("-" + std::to_string(key.size())); }
  void cleared() override { heard.push_back("clear"); }
};

std::shared_ptr<const StateSnapshot> snapshot(Ids tokens, size_t bytes) {
  auto s = std::make_shared<StateSnapshot>();
  s->vocab_size = 5000;
  s->length = int64_t(tokens.size());
  s->tokens = std::move(tokens);
  CacheSnapshot c;
  c.kind = CacheKind::RecurrentState;
  c.dims = {1, int64_t(bytes / 4)};
  c.data.assign(bytes, std::byte(1));
  s->caches.push_back(std::move(c));
  return s;
}

TEST(KvEvents, PrefixCacheTellsItsListener) {
  auto recorder = std::make_shared<Recorder>();
  PrefixCacheOptions options;
  options.memory_bytes = 2500;  // two snapshots of 1000 bytes (plus their tokens)
  options.listener = recorder;
  PrefixCache cache(options);
  cache.insert(snapshot({1, 2, 3}, 1000));
  cache.insert(snapshot({1, 2, 3, 4, 5}, 1000));
  cache.insert(snapshot({9, 9}, 1000));  // over budget: the least recently used ({1,2,3}) goes
  cache.clear();
  EXPECT_EQ(recorder->heard, (std::vector<std::string>{"+3", "+5", "+2", "-3", "clear"}));
  EXPECT_EQ(cache.stats().entries, 0);
  EXPECT_EQ(cache.find(Ids{1, 2, 3, 4, 5, 6}), nullptr);
}

// One message from a SUB socket: its parts (empty after `timeout_ms` without one).
std::vector<std::string> receive(void* socket, int timeout_ms) {
  zmq_pollitem_t item{socket, 0, ZMQ_POLLIN, 0};
  if (zmq_poll(&item, 1, timeout_ms) <= 0) return {};
  std::vector<std::string> parts;
  int more = 1;
  while (more) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, socket, 0) < 0) break;
    parts.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
    more = zmq_msg_more(&msg);
    zmq_msg_close(&msg);
  }
  return parts;
}

TEST(KvEvents, PublisherSendsVllmsWireFormat) {
  KvEventOptions options{.endpoint = "tcp://127.0.0.1:*", .topic = "kv@test@tiny", .block_size = 4};
  KvEventPublisher publisher(options);
  ASSERT_EQ(publisher.endpoint().rfind("tcp://127.0.0.1:", 0), 0u) << publisher.endpoint();
  void* context = zmq_ctx_new();
  void* sub = zmq_socket(context, ZMQ_SUB);
  ASSERT_EQ(zmq_connect(sub, publisher.endpoint().c_str()), 0);
  ASSERT_EQ(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "kv@", 3), 0);
  // A PUB socket drops what it sends before the subscription arrives: probe
  // with clears until one comes through (bounded), then start counting.
  std::vector<std::string> parts;
  for (int i = 0; i < 50 && parts.empty(); ++i) {
    publisher.cleared();
    parts = receive(sub, 100);
  }
  ASSERT_EQ(parts.size(), 3u);
  while (!receive(sub, 50).empty()) {
  }
  const Ids prompt = {11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  publisher.stored(std::span(prompt).first(5));  // one whole block
  publisher.stored(prompt);                       // the second block is new, the first is shared
  publisher.removed(std::span(prompt).first(5));  // still covered by the longer one: nothing
  publisher.removed(prompt);                      // both blocks go
  std::vector<std::vector<std::string>> messages;
  for (int i = 0; i < 3; ++i) messages.push_back(receive(sub, 2000));
  EXPECT_TRUE(receive(sub, 200).empty()) << "a fourth message";
  uint64_t last_sequence = 0;
  std::vector<uint64_t> hashes;
  for (size_t m = 0; m < messages.size(); ++m) {
    const auto& msg = messages[m];
    ASSERT_EQ(msg.size(), 3u) << "message " << m;
    EXPECT_EQ(msg[0], "kv@test@tiny");
    ASSERT_EQ(msg[1].size(), 8u);
    uint64_t sequence = 0;
    for (unsigned char c : msg[1]) sequence = sequence << 8 | c;
    if (m > 0) EXPECT_EQ(sequence, last_sequence + 1);
    last_sequence = sequence;
    const msgpack::object_handle handle = msgpack::unpack(msg[2].data(), msg[2].size());
    const msgpack::object& batch = handle.get();
    ASSERT_EQ(batch.type, msgpack::type::ARRAY);
    ASSERT_EQ(batch.via.array.size, 3u);
    EXPECT_EQ(batch.via.array.ptr[0].type, msgpack::type::FLOAT64);
    EXPECT_EQ(batch.via.array.ptr[2].type, msgpack::type::NIL);
    const msgpack::object& events = batch.via.array.ptr[1];
    ASSERT_EQ(events.via.array.size, 1u);
    const msgpack::object& e = events.via.array.ptr[0];
    const std::string tag = e.via.array.ptr[0].as<std::string>();
    if (m < 2) {
      ASSERT_EQ(tag, "BlockStored");
      ASSERT_EQ(e.via.array.size, 8u);
      const auto block = e.via.array.ptr[1].as<std::vector<uint64_t>>();
      ASSERT_EQ(block.size(), 1u);
      hashes.push_back(block[0]);
      if (m == 0) EXPECT_EQ(e.via.array.ptr[2].type, msgpack::type::NIL);
      else EXPECT_EQ(e.via.array.ptr[2].as<uint64_t>(), hashes[0]);  // the parent
      const Ids want(prompt.begin() + 4 * ptrdiff_t(m), prompt.begin() + 4 * ptrdiff_t(m) + 4);
      EXPECT_EQ(e.via.array.ptr[3].as<Ids>(), want);
      EXPECT_EQ(e.via.array.ptr[4].as<int>(), 4);
      EXPECT_EQ(e.via.array.ptr[5].type, msgpack::type::NIL);
      EXPECT_EQ(e.via.array.ptr[6].as<std::string>(), "CPU");
    } else {
      ASSERT_EQ(tag, "BlockRemoved");
      auto removed = e.via.array.ptr[1].as<std::vector<uint64_t>>();
      std::sort(removed.begin(), removed.end());
      std::sort(hashes.begin(), hashes.end());
      EXPECT_EQ(removed, hashes);
    }
  }
  EXPECT_EQ(hashes.size(), 2u);
  zmq_close(sub);
  zmq_ctx_term(context);
}

TEST(KvEvents, BadEndpointIsAClearError) {
  try {
    KvEventPublisher publisher({.endpoint = "nonsense://x"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-events nonsense://x"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace deltagen
