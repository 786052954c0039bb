// Images beyond one Conversation: chat messages with image parts, data: URLs
// on the server (Service + Scheduler in-process, no HTTP), the prompt cache
// and snapshots keyed by the images, and `deltagen chat`'s /image.
//
// The vision model: tiny-vl built with --vision (min_pixels lowered so the
// 64x96 golden PNG is not resized: 6 image tokens), with the tiny byte-level
// tokenizer of runtime_fixtures.h made to know tiny-vl's <|image_pad|> (id 12)
// and two vision brackets, and the official Qwen3.5 chat template.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/messages.h"
#include "runtime/engine_impl.h"
#include "runtime/prefix_cache.h"
#include "runtime/snapshot.h"
#include "runtime_fixtures.h"
#include "serve/data_url.h"
#include "serve/http_server.h"
#include "serve/service.h"
#include "serve_scripts.h"
#include "test_util.h"
#include "vision_fixtures.h"

namespace deltagen::test {
namespace {

using nlohmann::ordered_json;
using serve::ApiError;

// ---- messages -------------------------------------------------------------------

TEST(ImageMessages, ImagePartsKeepTheirOrderAndTheirSourcesComeBack) {
  const ordered_json in = ordered_json::parse(R"([
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": [
      {"type": "text", "text": "compare "},
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
      {"type": "text", "text": "and"},
      {"type": "image", "image": "b.png"}]},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])");
  std::vector<MessageImage> images;
  const ordered_json out = normalize_messages(in, &images);
  ASSERT_EQ(images.size(), 2u);
  EXPECT_EQ(images[0].source, "data:image/png;base64,AAAA");
  EXPECT_EQ(images[0].field, "messages[1].content[1].image_url.url");
  EXPECT_EQ(images[1].source, "b.png");
  EXPECT_EQ(images[1].field, "messages[1].content[3].image");
  EXPECT_EQ(out[1]["content"], ordered_json::parse(R"([{"type": "text", "text": "compare "}, {"type": "image"},
                                                        {"type": "text", "text": "and"}, {"type": "image"}])"));
  EXPECT_EQ(out[2]["content"], "ab");  // text parts only: joined, as without images
  EXPECT_EQ(out[0]["content"], "be brief");
}

TEST(ImageMessages, RefusedWhereNotAskedForAndInSystemMessages) {
  const ordered_json user = ordered_json::parse(
      R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}])");
  expect_error([&] { normalize_messages(user); }, "messages[0].content[0].type: 'image_url' is not supported");
  std::vector<MessageImage> images;
  const ordered_json system = ordered_json::parse(
      R"([{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}])");
  expect_error([&] { normalize_messages(system, &images); }, "messages[0].content[0]: system messages cannot hold images");
  const ordered_json no_url = ordered_json::parse(R"([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])");
  expect_error([&] { normalize_messages(no_url, &images); }, "messages[0].content[0].image_url.url: must be a string");
}

TEST(ImageMessages, TheQwenTemplateWritesOnePadPerImageBeforeTheText) {
  const fs::path file = fs::path(DELTAGEN_SOURCE_DIR) / ".." / "shared" / "reference" / "chat-templates" / "qwen3.5.jinja";
  const ChatTemplate t = ChatTemplate::from_source(read_text(file), "qwen3.5.jinja");
  ChatMessage m{.role = "user", .content = "what is it?"};
  m.images = {ImageInput{{1}, "a.png"}, ImageInput{{1}, "b.png"}};
  ChatRenderInputs in{ordered_json::array({message_json(m)}), nullptr, ordered_json::object(), false};
  EXPECT_EQ(t.render(in),
            "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|><|vision_start|><|image_pad|><|vision_end|>"
            "what is it?<|im_end|>\n");
  const ChatMessage back = message_from_json(message_json(m));  // a saved chat's messages keep the origins
  ASSERT_EQ(back.images.size(), 2u);
  EXPECT_EQ(back.images[1].origin, "b.png");
  EXPECT_EQ(back.content, "what is it?");
}

// ---- data: URLs -------------------------------------------------------------------

TEST(DataUrl, StrictBase64) {
  EXPECT_EQ(serve::decode_base64("aGVsbG8=", "x"), std::vector<uint8_t>({'h', 'e', 'l', 'l', 'o'}));
  EXPECT_EQ(serve::decode_base64("aGk=", "x"), std::vector<uint8_t>({'h', 'i'}));
  EXPECT_EQ(serve::decode_base64("aA==", "x"), std::vector<uint8_t>({'h'}));
  EXPECT_TRUE(serve::decode_base64("", "x").empty());
  expect_error([] { serve::decode_base64("aGVsbG8", "x"); }, "x: base64 length 7 is not a multiple of 4");
  expect_error([] { serve::decode_base64("aGV sbG=", "x"); }, "invalid base64 character at offset 3");
  expect_error([] { serve::decode_base64("aG=sbG8=", "x"); }, "invalid base64 character");
  expect_error([] { serve::decode_base64("aB==", "x"); }, "nonzero bits");
}

int status_of(const std::function<void()>& fn, std::string* message = nullptr) {
  try {
    fn();
  } catch (const ApiError& e) {
    if (message) *message = e.what();
    return e.status;
  }
  return 0;
}

TEST(DataUrl, OnlyBase64ImageDataUrlsWithinTheBound) {
  const std::string f = "messages[0].content[1].image_url.url";
  EXPECT_EQ(serve::image_from_data_url("data:image/png;base64,aGVsbG8=", f, 100), std::vector<uint8_t>({'h', 'e', 'l', 'l', 'o'}));
  std::string m;
  for (const char* url : {"http://example.com/a.png", "https://example.com/a.png", "file:///etc/passwd", "a.png"}) {
    EXPECT_EQ(status_of([&] { serve::image_from_data_url(url, f, 100); }, &m), 400) << url;
    EXPECT_EQ(m, f + ": only data: URLs are accepted (the server fetches nothing)");
  }
  EXPECT_EQ(status_of([&] { serve::image_from_data_url("data:image/png,abc", f, 100); }, &m), 400);
  EXPECT_NE(m.find("must be base64"), std::string::npos) << m;
  EXPECT_EQ(status_of([&] { serve::image_from_data_url("data:text/plain;base64,aGk=", f, 100); }, &m), 400);
  EXPECT_NE(m.find("media type"), std::string::npos) << m;
  EXPECT_EQ(status_of([&] { serve::image_from_data_url("data:image/png;base64,a!==", f, 100); }, &m), 400);
  EXPECT_EQ(m.rfind(f + ": invalid base64", 0), 0u) << m;
  EXPECT_EQ(status_of([&] { serve::image_from_data_url("data:image/png;base64,aGVsbG8=", f, 4); }, &m), 413);
}

// ---- the prompt cache and snapshots keyed by images ---------------------------------

std::shared_ptr<const StateSnapshot> fake_snapshot(std::vector<int64_t> tokens, std::vector<SnapshotImage> images) {
  auto s = std::make_shared<StateSnapshot>();
  s->vocab_size = 512;
  s->length = int64_t(tokens.size());
  s->tokens = std::move(tokens);
  s->images = std::move(images);
  return s;
}

TEST(ImageCacheKey, AnotherImageWithTheSameTokensStopsTheMatchAtItsFirstPad) {
  PrefixCache cache;
  const std::vector<int64_t> tokens = {1, 2, 10, 12, 12, 12, 11, 5, 6};
  cache.insert(fake_snapshot({1, 2}, {}));
  cache.insert(fake_snapshot(tokens, {{3, 3, "hash-a"}}));
  cache.insert(fake_snapshot({1, 2, 10, 12}, {{3, 3, "hash-a"}}));  // ends inside the image
  const std::vector<SnapshotImage> a = {{3, 3, "hash-a"}}, b = {{3, 3, "hash-b"}};
  std::vector<int64_t> longer = tokens;
  longer.push_back(7);
  EXPECT_EQ(cache.find(prefix_key(longer, a))->length, 9);
  EXPECT_EQ(cache.find(prefix_key(longer, b))->length, 2);  // not past the pad: the image differs
  EXPECT_EQ(cache.find(longer), cache.find(std::vector<int64_t>{1, 2, 10}));  // pads without an image key match no image
  EXPECT_TRUE(cache.contains(prefix_key(tokens, a)));
  EXPECT_FALSE(cache.contains(tokens));
  // The same tokens with another image are another entry, not a replacement.
  cache.insert(fake_snapshot(tokens, b));
  EXPECT_TRUE(cache.contains(prefix_key(tokens, a)));
  EXPECT_TRUE(cache.contains(prefix_key(tokens, b)));
  EXPECT_EQ(prefix_key(tokens, {}), tokens);
}

TEST(ImageCacheKey, SnapshotFilesKeepTheRopeDeltaAndImagesAndTextOnesStayVersion1) {
  StateSnapshot s = *fake_snapshot({1, 2, 12, 12, 3}, {{2, 2, "abc"}});
  s.rope_delta = -3;
  const std::vector<std::byte> bytes = serialize_snapshot(s);
  EXPECT_EQ(uint8_t(bytes[8]), 2);
  const StateSnapshot back = parse_snapshot(bytes, "test");
  EXPECT_EQ(back.rope_delta, -3);
  EXPECT_EQ(back.images, s.images);
  EXPECT_EQ(back.tokens, s.tokens);
  const StateSnapshot text = *fake_snapshot({1, 2, 3}, {});
  const std::vector<std::byte> v1 = serialize_snapshot(text);
  EXPECT_EQ(uint8_t(v1[8]), 1);  // what older builds read
  EXPECT_EQ(parse_snapshot(v1, "test").rope_delta, 0);
}

// ---- a --vision model with a tokenizer and the Qwen3.5 template ----------------------

constexpr int64_t kPad = 12, kVisionStart = 300, kVisionEnd = 301;

std::string vision_tokenizer_json() {
  auto j = nlohmann::json::parse(tiny_tokenizer_json());
  j["model"]["vocab"].erase(byte_level_char(12));  // form feed: never in a prompt
  j["model"]["vocab"].erase("w300");
  j["model"]["vocab"].erase("w301");
  auto added = [](int64_t id, const std::string& content) {
    return nlohmann::json{{"id", id},        {"content", content}, {"single_word", false}, {"lstrip", false},
                          {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  j["added_tokens"].push_back(added(kPad, "<|image_pad|>"));
  j["added_tokens"].push_back(added(kVisionStart, "<|vision_start|>"));
  j["added_tokens"].push_back(added(kVisionEnd, "<|vision_end|>"));
  return j.dump();
}

fs::path chat_template_file() {
  return fs::path(DELTAGEN_SOURCE_DIR) / ".." / "shared" / "reference" / "chat-templates" / "qwen3.5.jinja";
}

// tiny-vl built with (vision) or without --vision, once per process.
const fs::path& vision_chat_model(bool vision) {
  static TempDir dir;
  auto make = [](bool v) {
    const fs::path built = dir / (v ? "built-vl" : "built-text"), out = dir / (v ? "vl" : "text");
    build_tiny_vl(built, tiny_vl_options(v));
    copy_model_with_tokenizer(built, out, vision_tokenizer_json(), tiny_tokenizer_config_json());
    fs::copy_file(chat_template_file(), out / "chat_template.jinja");
    if (v) use_golden_min_pixels(out);
    return out;
  };
  static const fs::path vl = make(true);
  if (vision) return vl;
  static const fs::path text = make(false);
  return text;
}

fs::path golden_png() { return vision_golden_dir() / "images" / "img_64x96.png"; }

// A 64x96 binary PPM (decodes like any image) that is not the golden PNG.
std::string other_image_bytes() {
  std::string ppm = "P6\n96 64\n255\n";
  for (int y = 0; y < 64; ++y)
    for (int x = 0; x < 96; ++x) {
      ppm += char(x * 2);
      ppm += char(y * 3);
      ppm += char((x + y) % 256);
    }
  return ppm;
}

std::string base64(const std::string& bytes) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += k[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    out += std::string{k[v >> 18], k[(v >> 12) & 63]} + "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += std::string{k[v >> 18], k[(v >> 12) & 63], k[(v >> 6) & 63]} + "=";
  }
  return out;
}

std::string data_url(const std::string& bytes, const char* type = "image/png") {
  return std::string("data:") + type + ";base64," + base64(bytes);
}

std::string chat_body(const std::vector<std::string>& urls, const std::string& text = "what is in it?") {
  ordered_json content = ordered_json::array();
  for (const std::string& url : urls) content.push_back({{"type", "image_url"}, {"image_url", {{"url", url}}}});
  content.push_back({{"type", "text"}, {"text", text}});
  ordered_json body = {{"messages", ordered_json::array({{{"role", "user"}, {"content", content}}})},
                       {"max_tokens", 6},
                       {"temperature", 0},
                       {"ignore_eos", true}};
  return body.dump();
}

struct Served {
  std::vector<int64_t> prompt, generated;
  serve::SequenceEnd end;
};

class VisionServe : public ::testing::Test {
 protected:
  static std::shared_ptr<Engine> engine(bool vision = true) {
    return Engine::load(vision_chat_model(vision), EngineOptions{.threads = 1});
  }

  // One chat request through a Service and its Scheduler.
  static Served serve_chat(serve::Service& service, const std::string& body) {
    serve::PreparedChat c = service.prepare_chat(body);
    Served s;
    s.prompt = c.sequence.prompt;
    auto stream = service.scheduler().submit(std::move(c.sequence));
    std::vector<serve::TokenEvent> tokens;
    for (;;)
      if (auto end = stream->wait(tokens, std::chrono::milliseconds(50))) {
        s.end = std::move(*end);
        break;
      }
    s.generated = s.end.generated_ids;
    return s;
  }

  static std::string png() { return read_text(golden_png()); }
};

struct Server {
  explicit Server(std::shared_ptr<Engine> e, serve::SchedulerOptions o = {.parallel = 2, .prefill_chunk = 4})
      : engine(std::move(e)),
        scheduler(engine, o),
        service(engine, ChatTemplate::for_model(engine->model_dir()), scheduler, {"tiny-vl"}) {}
  std::shared_ptr<Engine> engine;
  serve::Scheduler scheduler;
  serve::Service service;
};

TEST_F(VisionServe, TheSameImageReusesTheCacheAndAnotherImageDoesNotGoPastItsPad) {
  Server server(engine());
  Server fresh(engine(), {.parallel = 1, .cache = false});
  const std::string a = chat_body({data_url(png())});
  const std::string b = chat_body({data_url(other_image_bytes(), "image/x-portable-pixmap")});

  const Served first = serve_chat(server.service, a);
  ASSERT_TRUE(first.end.error.empty()) << first.end.error;
  EXPECT_EQ(std::count(first.prompt.begin(), first.prompt.end(), kPad), 6);  // the 64x96 image: 6 tokens
  const int64_t first_pad = std::find(first.prompt.begin(), first.prompt.end(), kPad) - first.prompt.begin();
  EXPECT_EQ(first.end.cached_tokens, 0);
  const Served want_a = serve_chat(fresh.service, a);
  EXPECT_EQ(first.generated, want_a.generated);

  // The same image again: its state is reused past the image (the checkpoint at the end of the user message).
  const int64_t hits_before = server.scheduler.stats().cache.hits;
  const Served again = serve_chat(server.service, a);
  EXPECT_GT(again.end.cached_tokens, first_pad + 6);
  EXPECT_GT(server.scheduler.stats().cache.hits, hits_before);
  EXPECT_EQ(again.generated, first.generated);

  // Another image, the same tokens: nothing past its first pad comes from the cache.
  const Served other = serve_chat(server.service, b);
  ASSERT_TRUE(other.end.error.empty()) << other.end.error;
  EXPECT_EQ(other.prompt, first.prompt);
  EXPECT_LE(other.end.cached_tokens, first_pad);
  EXPECT_EQ(other.generated, serve_chat(fresh.service, b).generated);

  // And the second image's own state is cached now, beside the first's.
  const Served other_again = serve_chat(server.service, b);
  EXPECT_GT(other_again.end.cached_tokens, first_pad + 6);
  EXPECT_EQ(other_again.generated, other.generated);
}

TEST_F(VisionServe, AnImagePromptEqualsTheConversationApi) {
  Server server(engine());
  const Served s = serve_chat(server.service, chat_body({data_url(png()), data_url(png())}, "two"));
  ASSERT_TRUE(s.end.error.empty()) << s.end.error;
  // The same prompt before expansion, through Conversation::generate with the images.
  std::vector<int64_t> collapsed;
  for (size_t i = 0; i < s.prompt.size(); ++i)
    if (s.prompt[i] != kPad || i == 0 || s.prompt[i - 1] != kPad) collapsed.push_back(s.prompt[i]);
  Conversation c(server.engine);
  GenerationOptions o;
  o.max_new_tokens = 6;
  o.sampling.temperature = 0;
  const std::vector<ImageInput> images = {ImageInput::from_file(golden_png()), ImageInput::from_file(golden_png())};
  const GenerationResult r = c.generate(std::span<const int64_t>(collapsed), images, o);
  EXPECT_EQ(r.generated_ids, s.generated);
}

TEST_F(VisionServe, BadImagesAreOneLine400s) {
  Server server(engine());
  auto error = [&](const std::string& body, int status, const std::string& phrase, Server* on = nullptr) {
    try {
      (on ? on : &server)->service.prepare_chat(body);
      ADD_FAILURE() << "no error for " << phrase;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, status) << e.what();
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  };
  error(chat_body({"https://example.com/cat.png"}), 400,
        "messages[0].content[0].image_url.url: only data: URLs are accepted (the server fetches nothing)");
  error(chat_body({"data:image/png;base64,%%%%"}), 400, "messages[0].content[0].image_url.url: invalid base64");
  error(chat_body({data_url("not an image at all")}), 400, "messages[0].content[0].image_url.url:");
  error(chat_body(std::vector<std::string>(17, data_url(png()))), 400, "17 images, more than the 16");
  error(chat_body({data_url(png())}, "<|image_pad|>"), 400, "image placeholders");  // a pad typed as text
  {
    ordered_json body = ordered_json::parse(chat_body({}, "<|image_pad|>"));
    error(body.dump(), 400, "holds <|image_pad|> tokens but the request has no images");
  }

  Server text(engine(false));
  error(chat_body({data_url(png())}), 400, "messages[0].content[0].image_url.url: this model takes no images", &text);
  // Bounds are the service's options.
  serve::Service small(server.engine, ChatTemplate::for_model(server.engine->model_dir()), server.scheduler,
                       {"tiny-vl", 1, 100});
  try {
    small.prepare_chat(chat_body({data_url(png())}));
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 413) << e.what();
  }
  // The server goes on.
  EXPECT_TRUE(serve_chat(server.service, chat_body({data_url(png())})).end.error.empty());
}

// A snapshot after an image turn continues where the conversation itself
// would have (the rope delta survives the file).
TEST_F(VisionServe, ASnapshotAfterAnImageTurnContinuesWithTheSameLogits) {
  TempDir dir;
  const std::vector<int64_t> turn1 = {510, 104, 105, kVisionStart, kPad, kVisionEnd, 106, 511, 510, 97};
  const std::vector<int64_t> turn2 = {511, 510, 104, 105, 106, 107, 511, 510, 97};
  const std::vector<ImageInput> image = {ImageInput::from_file(golden_png())};
  GenerationOptions o;
  o.max_new_tokens = 3;
  o.sampling.temperature = 0;

  Conversation a(engine());
  a.generate(std::span<const int64_t>(turn1), image, o);
  a.snapshot().save(dir / "s.dgstate");
  o.collect_logits = true;
  const GenerationResult want = a.generate(std::span<const int64_t>(turn2), o);

  Conversation b(engine());
  b.restore(Snapshot::load(dir / "s.dgstate"));
  const GenerationResult got = b.generate(std::span<const int64_t>(turn2), o);
  EXPECT_EQ(got.generated_ids, want.generated_ids);
  ASSERT_EQ(got.logits.size(), want.logits.size());
  EXPECT_LT(max_abs_diff(got.logits, want.logits), 1e-5);
  const Snapshot saved = Snapshot::load(dir / "s.dgstate");
  const StateSnapshot& state = detail::Access::state(saved);
  EXPECT_NE(state.rope_delta, 0);  // 6 tokens on a 2x3 grid: the positions run 3 behind the indices
  ASSERT_EQ(state.images.size(), 1u);
  EXPECT_EQ(state.images[0].start, 4);
  EXPECT_EQ(state.images[0].tokens, 6);

  // Without the delta the continuation differs: the test sees what it claims to.
  StateSnapshot broken = state;
  broken.rope_delta = 0;
  Conversation c(engine());
  c.restore(detail::Access::snapshot(broken));
  const GenerationResult wrong = c.generate(std::span<const int64_t>(turn2), o);
  EXPECT_GT(max_abs_diff(wrong.logits, want.logits), 1e-6);
}

// Through HTTP (the server's own transport, in-process): statuses and error
// bodies as a client sees them, a streamed image request, and the server
// healthy after each.
TEST_F(VisionServe, OverHttp) {
  Server server(engine());
  serve::Service service(server.engine, ChatTemplate::for_model(server.engine->model_dir()), server.scheduler,
                         {"tiny-vl", 2, 5000});  // the PNG is 1755 bytes, the PPM 18445
  serve::HttpServer http(service, {.port = 0});
  const int port = http.bind();
  std::thread thread([&] { http.run(); });
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  auto post = [&](const std::string& body) { return client.Post("/v1/chat/completions", body, "application/json"); };
  auto error_of = [](const httplib::Result& r) {
    return nlohmann::json::parse(r->body)["error"]["message"].get<std::string>();
  };

  auto ok = post(chat_body({data_url(png())}));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  const auto reply = nlohmann::json::parse(ok->body);
  EXPECT_GT(reply["usage"]["prompt_tokens"].get<int64_t>(), 6);

  auto remote = post(chat_body({"http://example.com/cat.png"}));
  ASSERT_TRUE(remote);
  EXPECT_EQ(remote->status, 400);
  EXPECT_EQ(error_of(remote), "messages[0].content[0].image_url.url: only data: URLs are accepted (the server fetches nothing)");
  auto three = post(chat_body({data_url(png()), data_url(png()), data_url(png())}));
  ASSERT_TRUE(three);
  EXPECT_EQ(three->status, 400);
  EXPECT_NE(error_of(three).find("3 images, more than the 2"), std::string::npos) << three->body;
  auto large = post(chat_body({data_url(other_image_bytes(), "image/x-portable-pixmap")}));
  ASSERT_TRUE(large);
  EXPECT_EQ(large->status, 413) << large->body;
  auto broken = post(chat_body({data_url(png().substr(0, 500))}));
  ASSERT_TRUE(broken);
  EXPECT_EQ(broken->status, 400);
  EXPECT_EQ(error_of(broken).rfind("messages[0].content[0].image_url.url: ", 0), 0u) << broken->body;

  ordered_json streamed = ordered_json::parse(chat_body({data_url(png())}));
  streamed["stream"] = true;
  auto sse = post(streamed.dump());
  ASSERT_TRUE(sse);
  EXPECT_EQ(sse->status, 200);
  EXPECT_NE(sse->body.find("data: [DONE]"), std::string::npos) << sse->body;
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  http.stop();
  thread.join();
}

// The chat page (src/serve/web/chat.html) in headless Chromium attaches the
// golden PNG and sends it (tests/serve/web_page_image.mjs): the reply's prompt
// is the text-only prompt plus the image's 8 tokens, 6 <|image_pad|> (64x96
// pixels: 4x6 patches of 16, merged 2x2) between <|vision_start|> and
// <|vision_end|>.
TEST_F(VisionServe, ChatPageAttachesAnImage) {
  if (const std::string why = missing_prerequisite(true); !why.empty()) GTEST_SKIP() << why;
  Server server(engine());
  serve::HttpServer http(server.service, {.port = 0});
  const int port = http.bind();
  std::thread thread([&] { http.run(); });
  const nlohmann::json config = {{"base", "http://127.0.0.1:" + std::to_string(port)},
                                 {"modules", node_modules().string()},
                                 {"out", out_dir("web-image").string()},
                                 {"chromium", kChromium},
                                 {"image", golden_png().string()},
                                 {"maxTokens", 4}};
  const ScriptResult r = run_script("web_page_image.mjs", config, 120);
  http.stop();
  thread.join();
  ASSERT_FALSE(r.result.is_null());
  EXPECT_EQ(r.result["with_image"].get<int64_t>() - r.result["text_only"].get<int64_t>(), 8) << r.result.dump();
  std::printf("chat page with an image: %s\n", r.result.dump().c_str());
}

// ---- deltagen chat /image -------------------------------------------------------------

TEST(VisionChatCli, ImageCommandAttachesToTheNextMessageAndErrorsLetTheChatGoOn) {
  TempDir dir;
  const std::string model = vision_chat_model(true).string();
  const std::string input = "/help\n/image " + golden_png().string() + "\nwhat is it?\n/image " +
                            (dir / "missing.png").string() + "\n/image " + chat_template_file().string() +
                            "\nand now?\n";
  const auto r = run_cli_with_input({"chat", "--model", model, "--max-new-tokens", "2", "--temperature", "0", "--json"},
                                    input);
  EXPECT_EQ(r.exit_code, 1) << r.err;  // the two bad /image lines
  EXPECT_NE(r.err.find("/image FILE"), std::string::npos) << r.err;  // /help lists it
  EXPECT_NE(r.err.find("missing.png"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("qwen3.5.jinja"), std::string::npos) << r.err;
  std::vector<nlohmann::json> turns;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) turns.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(turns.size(), 2u) << r.out << r.err;
  // The same turns through the library: the same replies and conversation (the image stays in the history).
  Chat chat(Engine::load(model, EngineOptions{.threads = 1}));
  ChatMessage m{.role = "user", .content = "what is it?"};
  m.images = {ImageInput::from_file(golden_png())};
  GenerationOptions o;
  o.max_new_tokens = 2;
  o.sampling.temperature = 0;
  const ChatReply reply = chat.send(m, o);
  EXPECT_EQ(turns[0]["generated_ids"], nlohmann::json(reply.generated_ids));
  EXPECT_EQ(turns[0]["conversation_tokens"].get<int64_t>(), chat.conversation().length());
  const ChatReply second = chat.send("and now?", o);
  EXPECT_EQ(turns[1]["generated_ids"], nlohmann::json(second.generated_ids));
  EXPECT_EQ(turns[1]["conversation_tokens"].get<int64_t>(), chat.conversation().length());
  EXPECT_EQ(std::count(chat.conversation().tokens().begin(), chat.conversation().tokens().end(), kPad), 6);
  EXPECT_LT(second.prefilled_tokens, chat.conversation().length() - 6);  // the image was not run again

  const auto text = run_cli_with_input({"chat", "--model", vision_chat_model(false).string()},
                                       "/image " + golden_png().string() + "\n/exit\n");
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.err.find("takes no images"), std::string::npos) << text.err;
}

}  // namespace
}  // namespace deltagen::test
