// `deltagen serve` as a model server behind a router (llm-d / the Gateway API
// Inference Extension, docs/scale-out.md), on loopback with the small
// trained model of serve_process.h:
//   ServeRouter.HealthFollowsLoadingServingDraining  /health 503 while loading and
//       while draining after SIGTERM; a stream in flight still finishes
//   ServeRouter.AModelThatDoesNotLoadEndsTheServer   exit 1 with the error, no hang
//   ServeRouter.RequestIdVersionModelsAndRender      x-request-id, /version, /v1/models'
//       vLLM fields, the /render twins (ids = what the real endpoint runs,
//       the same errors)
//   ServeRouter.MetricsContract                      the vllm:* names a picker reads:
//       promtool accepts the scrape, a saturating load shows waiting > 0 and
//       running == --parallel, both 0 after, a repeated prompt raises the
//       prefix-cache hit counters by its cached_tokens; /metrics p99 printed
//   ServeKvEvents.SubscriberDecodesTheCachesChanges  a ZeroMQ subscriber reads the
//       events: stored token ids = the render endpoint's, sequence numbers
//       consecutive, evictions and /reset_prefix_cache produce their events
//   ServeScaleOut.PickerPrefersTheIdleReplicaAndKeepsAPrefixOnOne  a test picker with
//       the documented queue, KV-use and approximate prefix scorers over three
//       replicas: the idle one wins under skewed load; a shared system prompt
//       stays on one replica and comes from its cache
//   ServeScaleOut.HaproxyKeepsServingWhenAReplicaDies  HAProxy with /health checks in front
//       of three replicas: SSE passes through unchanged; a replica killed
//       mid-stream cuts its client off at once (no hang), the others serve
// Every wait is bounded. Run time: ~30 s on 2 cores.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <msgpack.hpp>  // MSGPACK_NO_BOOST: CMakeLists.txt
#include <zmq.h>

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "serve_process.h"
#include "test_util.h"

namespace deltagen {
namespace {

using nlohmann::json;
using test::Server;
using SteadyClock = std::chrono::steady_clock;

struct Reply {
  int status = -1;  // -1: no answer
  std::string body;
  json j;  // the body parsed (discarded when not JSON)
  httplib::Headers headers;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

Reply call(const std::string& base, const std::string& method, const std::string& path, const std::string& body = "",
           httplib::Headers headers = {}) {
  httplib::Client client(base);
  client.set_connection_timeout(5);
  client.set_read_timeout(120);
  httplib::Request req;
  req.method = method;
  req.path = path;
  req.headers = std::move(headers);
  if (!body.empty()) {
    req.body = body;
    req.set_header("Content-Type", "application/json");
  }
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  Reply r;
  if (!client.send(req, res, error)) return r;
  r.status = res.status;
  r.body = res.body;
  r.headers = res.headers;
  r.j = json::parse(res.body, nullptr, false);
  return r;
}

Reply get(const std::string& base, const std::string& path) { return call(base, "GET", path); }
Reply post(const std::string& base, const std::string& path, const json& body) { return call(base, "POST", path, body.dump()); }

json chat(const std::string& text, int max_tokens) {
  return {{"messages", json::array({{{"role", "user"}, {"content", text}}})}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

// An OpenAI error on one line with the wanted status.
void expect_error(const Reply& r, int status, const std::string& what) {
  EXPECT_EQ(r.status, status) << what << ": " << r.body;
  EXPECT_TRUE(r.j.is_object() && r.j.contains("error") && r.j["error"]["message"].is_string()) << what << ": " << r.body;
  EXPECT_EQ(r.body.find('\n'), std::string::npos) << what << ": not one line";
}

// /metrics as {series: value}, e.g. {"vllm:num_requests_waiting{model_name=\"m\"}": 0}.
std::map<std::string, double> parse_metrics(const std::string& text) {
  std::map<std::string, double> m;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    m[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return m;
}

// The value of the one series of `name` (any labels); NaN when absent.
double series(const std::map<std::string, double>& m, const std::string& name) {
  for (const auto& [key, value] : m)
    if (key == name || key.rfind(name + "{", 0) == 0) return value;
  return std::nan("");
}

// ---- /health, x-request-id, /version, /v1/models, render ------------------------------------

TEST(ServeRouter, HealthFollowsLoadingServingDraining) {
  Server s("phases", {"--parallel", "1", "--drain-seconds", "60"}, "", false);
  const std::smatch m = s.wait_for_log(std::regex(R"(loading .* on (http://127\.0\.0\.1:\d+))"), std::chrono::seconds(60));
  ASSERT_FALSE(m.empty()) << s.log();
  const std::string base = m[1];
  // Poll while it loads: 503 "loading" (and the API refuses) until 200.
  int loading_503 = 0, api_503 = 0;
  Reply health;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(120);
  while (SteadyClock::now() < deadline) {
    health = get(base, "/health");
    if (health.status == 200) break;
    if (health.status == 503 && health.j.value("status", "") == "loading") ++loading_503;
    if (loading_503 == 1) {
      const Reply r = post(base, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}});
      if (r.status == 503) ++api_503, expect_error(r, 503, "a completion while loading");
    }
  }
  ASSERT_EQ(health.status, 200) << s.log();
  EXPECT_GT(loading_503, 0) << "never saw /health 503 while the model loaded";
  EXPECT_EQ(api_503, 1) << "a completion while loading was not refused with 503";
  s.wait_until_serving();
  EXPECT_EQ(s.base(), base);

  // A stream in flight when SIGTERM comes finishes (the drain waits for it)
  // while /health and new requests get 503.
  std::atomic<bool> streaming{false};
  std::string stream_body;
  std::thread client([&] {
    httplib::Client c(base);
    c.set_read_timeout(120);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = json{{"prompt", "Once upon a time"}, {"max_tokens", 300}, {"ignore_eos", true}, {"stream", true}}.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      stream_body.append(data, size);
      streaming = true;
      return true;
    };
    httplib::Response res;
    httplib::Error error;
    c.send(req, res, error);
  });
  for (int i = 0; i < 2000 && !streaming; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(streaming.load()) << s.log();
  s.signal(SIGTERM);
  Reply draining;
  for (int i = 0; i < 400; ++i) {  // until the watcher has turned it (2 s at most)
    draining = get(base, "/health");
    if (draining.status == 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(draining.status, 503) << draining.body;
  EXPECT_EQ(draining.j.value("status", ""), "draining") << draining.body;
  expect_error(post(base, "/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}}), 503, "a completion while draining");
  client.join();
  EXPECT_NE(stream_body.find("\"finish_reason\":\"length\""), std::string::npos) << "the stream was cut: " << stream_body.substr(0, 300);
  EXPECT_NE(stream_body.find("data: [DONE]"), std::string::npos);
  const std::optional<int> exit = s.wait(std::chrono::seconds(30));
  ASSERT_TRUE(exit.has_value()) << s.log();
  EXPECT_EQ(*exit, 0) << s.log();
}

// The server listens before it loads: a model that fails to load must still
// end the process (its HTTP thread stopped however early), with the error.
TEST(ServeRouter, AModelThatDoesNotLoadEndsTheServer) {
  test::TempDir tmp;
  const std::string cmd = "timeout -k 2 20 " + test::shell_quote(DELTAGEN_CLI) + " serve --model " +
                          test::shell_quote((tmp / "missing").string()) + " --port 0 >/dev/null 2>" +
                          test::shell_quote((tmp / "err").string());
  const int status = std::system(cmd.c_str());
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1) << "124: it hung; " << test::read_text(tmp / "err");
  EXPECT_NE(test::read_text(tmp / "err").find("model folder not found"), std::string::npos) << test::read_text(tmp / "err");
}

TEST(ServeRouter, RequestIdVersionModelsAndRender) {
  Server s("render", {"--parallel", "2", "--context", "256"});
  const std::string& base = s.base();

  // x-request-id: echoed, made up when absent, refused when it could not be echoed.
  const Reply echoed = call(base, "GET", "/health", "", {{"x-request-id", "router-42:abc"}});
  EXPECT_EQ(echoed.header("x-request-id"), "router-42:abc");
  const Reply made = get(base, "/v1/models");
  EXPECT_EQ(made.header("x-request-id").rfind("req-", 0), 0u) << made.header("x-request-id");
  EXPECT_NE(get(base, "/v1/models").header("x-request-id"), made.header("x-request-id"));
  expect_error(call(base, "GET", "/health", "", {{"x-request-id", std::string(300, 'x')}}), 400, "a 300-byte request id");
  const Reply missing = call(base, "GET", "/nowhere", "", {{"x-request-id", "r-404"}});
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.header("x-request-id"), "r-404");

  const Reply version = get(base, "/version");
  ASSERT_EQ(version.status, 200) << version.body;
  EXPECT_TRUE(version.j["version"].is_string() && !version.j["version"].get<std::string>().empty()) << version.body;

  const Reply models = get(base, "/v1/models");
  ASSERT_EQ(models.status, 200);
  const json& model = models.j["data"][0];
  EXPECT_EQ(model["id"], test::kAlias);
  EXPECT_EQ(model["owned_by"], "deltagen");
  EXPECT_EQ(model["root"], "qwen35-tiny-en-int4");  // the folder's name, under the alias
  EXPECT_EQ(model["max_model_len"], 256);

  // Chat render: the ids of the rendered prompt, which the real request then runs.
  const json body = chat("What is the capital of France?", 4);
  const Reply render = post(base, "/v1/chat/completions/render", body);
  ASSERT_EQ(render.status, 200) << render.body;
  const auto ids = render.j["token_ids"].get<std::vector<int64_t>>();
  const Reply tokens = post(base, "/tokenize", {{"content", render.j["prompt"]}});
  EXPECT_EQ(tokens.j["tokens"].get<std::vector<int64_t>>(), ids);
  const Reply real = post(base, "/v1/chat/completions", body);
  ASSERT_EQ(real.status, 200) << real.body;
  EXPECT_EQ(real.j["usage"]["prompt_tokens"], ids.size());
  // Text render: the prompt's ids, given as text or as ids.
  const Reply text = post(base, "/v1/completions/render", {{"prompt", "Hello world"}, {"max_tokens", 2}});
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(text.j["token_ids"], post(base, "/tokenize", {{"content", "Hello world"}}).j["tokens"]);
  EXPECT_EQ(post(base, "/v1/completions/render", {{"prompt", text.j["token_ids"]}}).j["token_ids"], text.j["token_ids"]);

  // Errors: the same as the real endpoints', status and message.
  std::string long_text;
  for (int i = 0; i < 200; ++i) long_text += "many words here ";
  const std::vector<std::pair<std::string, json>> bad_chats = {
      {"no messages", json{{"max_tokens", 4}}},
      {"a bad role", json{{"messages", json::array({{{"role", "wizard"}, {"content", "x"}}})}}},
      {"too long", chat(long_text, 4)},
      {"bad temperature", json{{"messages", body["messages"]}, {"temperature", -1}}},
  };
  for (const auto& [what, bad] : bad_chats) {
    const Reply r = post(base, "/v1/chat/completions/render", bad), want = post(base, "/v1/chat/completions", bad);
    expect_error(r, want.status, "chat render, " + what);
    EXPECT_GE(r.status, 400);
    EXPECT_EQ(r.j["error"], want.j["error"]) << what;
  }
  const std::vector<std::pair<std::string, json>> bad_texts = {
      {"no prompt", json{{"max_tokens", 4}}},
      {"an id outside the vocabulary", json{{"prompt", json::array({1, 2, 99999999})}}},
      {"max_tokens 0", json{{"prompt", "hi"}, {"max_tokens", 0}}},
  };
  for (const auto& [what, bad] : bad_texts) {
    const Reply r = post(base, "/v1/completions/render", bad), want = post(base, "/v1/completions", bad);
    expect_error(r, want.status, "text render, " + what);
    EXPECT_EQ(r.j["error"], want.j["error"]) << what;
  }
  expect_error(call(base, "POST", "/v1/completions/render", "{not json"), 400, "malformed JSON");
}

// ---- /metrics under the names a picker reads -------------------------------------------------

TEST(ServeRouter, MetricsContract) {
  constexpr int kParallel = 2, kRequests = 6;
  Server s("metrics", {"--parallel", std::to_string(kParallel), "--context", "1024"});
  const std::string& base = s.base();
  const Reply first = get(base, "/metrics");
  ASSERT_EQ(first.status, 200);
  // Every name with its TYPE line, one series each (the histograms: their buckets, _sum, _count).
  const std::map<std::string, std::string> types = {
      {"vllm:num_requests_waiting", "gauge"},          {"vllm:num_requests_running", "gauge"},
      {"vllm:kv_cache_usage_perc", "gauge"},           {"vllm:gpu_cache_usage_perc", "gauge"},
      {"vllm:cache_config_info", "gauge"},             {"vllm:prefix_cache_queries_total", "counter"},
      {"vllm:prefix_cache_hits_total", "counter"},     {"vllm:time_to_first_token_seconds", "histogram"},
      {"vllm:inter_token_latency_seconds", "histogram"}, {"vllm:time_per_output_token_seconds", "histogram"},
      {"vllm:request_queue_time_seconds", "histogram"}, {"deltagen_requests_queued", "gauge"},
      {"deltagen_requests_running", "gauge"}};
  for (const auto& [name, type] : types)
    EXPECT_NE(first.body.find("# TYPE " + name + " " + type + "\n"), std::string::npos) << name;
  const auto m0 = parse_metrics(first.body);
  EXPECT_EQ(m0.count("vllm:cache_config_info{model_name=\"qwen35-tiny-en\",block_size=\"16\",num_gpu_blocks=\"128\"}"), 1u)
      << first.body.substr(first.body.find("vllm:cache_config_info"), 300);
  EXPECT_EQ(series(m0, "vllm:time_to_first_token_seconds_count"), 0);

  // A saturating load: more requests than rows, each generating for a while.
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      const Reply r = post(base, "/v1/completions",
                           {{"prompt", "Story number " + std::to_string(i) + ":"}, {"max_tokens", 500}, {"ignore_eos", true}});
      if (r.status == 200) ++ok;
    });
  // Poll as a picker does (every 50 ms), timing each scrape.
  std::vector<double> latency_ms;
  bool saturated = false;  // running == parallel with some waiting, in one scrape
  double usage_max = 0;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(120);
  while (ok < kRequests && SteadyClock::now() < deadline) {
    const auto t0 = SteadyClock::now();
    const Reply r = get(base, "/metrics");
    latency_ms.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count());
    ASSERT_EQ(r.status, 200);
    const auto m = parse_metrics(r.body);
    const double running = series(m, "vllm:num_requests_running"), waiting = series(m, "vllm:num_requests_waiting");
    EXPECT_LE(running, kParallel);
    EXPECT_EQ(running, series(m, "deltagen_requests_running"));
    EXPECT_EQ(waiting, series(m, "deltagen_requests_queued"));
    saturated |= running == kParallel && waiting > 0;
    const double usage = series(m, "vllm:kv_cache_usage_perc");
    EXPECT_TRUE(usage >= 0 && usage <= 1) << usage;
    usage_max = std::max(usage_max, usage);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok, kRequests);
  EXPECT_TRUE(saturated) << "never saw running == " << kParallel << " with requests waiting";
  EXPECT_GT(usage_max, 0);
  const auto after = parse_metrics(get(base, "/metrics").body);
  EXPECT_EQ(series(after, "vllm:num_requests_running"), 0);
  EXPECT_EQ(series(after, "vllm:num_requests_waiting"), 0);
  EXPECT_EQ(series(after, "vllm:kv_cache_usage_perc"), 0);
  EXPECT_EQ(series(after, "vllm:time_to_first_token_seconds_count"), kRequests);
  EXPECT_EQ(series(after, "vllm:request_queue_time_seconds_count"), kRequests);
  EXPECT_EQ(series(after, "vllm:inter_token_latency_seconds_count"), kRequests * 499);
  EXPECT_EQ(series(after, "vllm:time_to_first_token_seconds_bucket{model_name=\"qwen35-tiny-en\",le=\"+Inf\"}"), kRequests);

  // A repeated conversation: the second time its history comes from the
  // cache, and the hit counter rises by exactly the cached tokens.
  const json body = chat("Tell me about the sea and its many colours.", 8);
  ASSERT_EQ(post(base, "/v1/chat/completions", body).status, 200);
  const auto before = parse_metrics(get(base, "/metrics").body);
  const Reply again = post(base, "/v1/chat/completions", body);
  ASSERT_EQ(again.status, 200);
  const int64_t cached = again.j["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(cached, 0);
  const auto later = parse_metrics(get(base, "/metrics").body);
  EXPECT_EQ(series(later, "vllm:prefix_cache_hits_total") - series(before, "vllm:prefix_cache_hits_total"), cached);
  EXPECT_EQ(series(later, "vllm:prefix_cache_queries_total") - series(before, "vllm:prefix_cache_queries_total"),
            again.j["usage"]["prompt_tokens"].get<double>());

  std::sort(latency_ms.begin(), latency_ms.end());
  ASSERT_FALSE(latency_ms.empty());
  const double p50 = latency_ms[latency_ms.size() / 2], p99 = latency_ms[std::min(latency_ms.size() - 1, latency_ms.size() * 99 / 100)];
  std::printf("/metrics under load: %zu scrapes, p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", latency_ms.size(), p50, p99,
              latency_ms.back());
  EXPECT_LT(p99, 50.0) << "a scrape must fit a 50 ms polling interval";

  // promtool (Debian's prometheus package) lints the scrape.
  if (std::system("promtool --version >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool not found (Debian's prometheus package, scripts/setup.sh): the scrape was not linted";
  test::TempDir tmp;
  {
    std::ofstream out(tmp / "scrape.txt", std::ios::binary);
    out << get(base, "/metrics").body;
  }
  const std::string cmd = "promtool check metrics <" + test::shell_quote((tmp / "scrape.txt").string()) + " >" +
                          test::shell_quote((tmp / "lint.txt").string()) + " 2>&1";
  const int status = std::system(cmd.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  // 0: clean; 3: lint problems only (1 would be a parse error). The one
  // problem allowed is promlint's advice against ':' in names, which vLLM's
  // names carry and the picker reads as they are.
  EXPECT_TRUE(code == 0 || code == 3) << "promtool exit " << code << ":\n" << test::read_text(tmp / "lint.txt");
  std::istringstream lint(test::read_text(tmp / "lint.txt"));
  int colon_notes = 0;
  for (std::string line; std::getline(lint, line);) {
    if (line.empty()) continue;
    const bool vllm_colon = line.rfind("vllm:", 0) == 0 && line.find("metric names should not contain ':'") != std::string::npos;
    EXPECT_TRUE(vllm_colon) << "promtool: " << line;
    colon_notes += vllm_colon ? 1 : 0;
  }
  std::printf("promtool: exit %d, %d notes about ':' in vLLM's names, nothing else\n", code, colon_notes);
}

// ---- a test picker over three replicas ------------------------------------------------------

// The scorers docs/scale-out.md describes, as GIE's picker computes them
// from each replica's /metrics, in miniature:
//   queue   (max - waiting) / (max - min) over the replicas (1 when all equal)
//   kv      1 - vllm:kv_cache_usage_perc
//   prefix  the share of the prompt's 64-character blocks (chained) this
//           picker last sent to that replica (approximate: it remembers its
//           own choices; the replicas are not asked)
// The highest weighted sum wins (prefix 3, queue 2, kv 1); ties go to the lowest index.
class TestPicker {
 public:
  explicit TestPicker(std::vector<std::string> replicas) : replicas_(std::move(replicas)) {}

  struct Choice {
    size_t replica = 0;
    std::vector<double> queue, kv, prefix;
  };

  Choice pick(const std::string& prompt) {
    Choice c;
    std::vector<double> waiting;
    for (const std::string& base : replicas_) {
      const auto m = parse_metrics(get(base, "/metrics").body);
      waiting.push_back(series(m, "vllm:num_requests_waiting"));
      c.kv.push_back(1 - series(m, "vllm:kv_cache_usage_perc"));
    }
    const double lo = *std::min_element(waiting.begin(), waiting.end()), hi = *std::max_element(waiting.begin(), waiting.end());
    for (double w : waiting) c.queue.push_back(hi == lo ? 1.0 : (hi - w) / (hi - lo));
    const std::vector<size_t> blocks = prefix_blocks(prompt);
    for (size_t r = 0; r < replicas_.size(); ++r) {
      size_t matched = 0;
      for (size_t b : blocks) {
        auto it = owner_.find(b);
        if (it == owner_.end() || it->second != r) break;
        ++matched;
      }
      c.prefix.push_back(blocks.empty() ? 0.0 : double(matched) / double(blocks.size()));
    }
    double best = -1;
    for (size_t r = 0; r < replicas_.size(); ++r) {
      const double score = 3 * c.prefix[r] + 2 * c.queue[r] + c.kv[r];
      if (score > best) best = score, c.replica = r;
    }
    for (size_t b : blocks) owner_[b] = c.replica;
    return c;
  }

 private:
  static std::vector<size_t> prefix_blocks(const std::string& prompt) {
    std::vector<size_t> out;
    size_t h = 0;
    for (size_t start = 0; start + 64 <= prompt.size(); start += 64) {
      h = std::hash<std::string>{}(std::to_string(h) + prompt.substr(start, 64));
      out.push_back(h);
    }
    return out;
  }

  std::vector<std::string> replicas_;
  std::map<size_t, size_t> owner_;  // prefix block -> the replica it was sent to
};

std::vector<std::unique_ptr<Server>> start_replicas(const std::string& name, int n, std::vector<std::string> flags) {
  std::vector<std::unique_ptr<Server>> out;
  for (int i = 0; i < n; ++i) out.push_back(std::make_unique<Server>(name + std::to_string(i), flags));
  return out;
}

TEST(ServeScaleOut, PickerPrefersTheIdleReplicaAndKeepsAPrefixOnOne) {
  // Snapshots every 64 tokens: a shared system prompt longer than that is
  // reusable by requests that differ after it (the message-boundary snapshot
  // of each request ends after its own question).
  auto replicas = start_replicas("picker", 3, {"--parallel", "1", "--context", "2048", "--checkpoint-every", "64"});
  std::vector<std::string> bases;
  for (auto& r : replicas) bases.push_back(r->base());

  // Skewed load: replica 0 runs one request and queues two, replica 1 runs one.
  std::vector<std::thread> load;
  std::atomic<int> done{0};
  const json long_job = {{"prompt", "A long story:"}, {"max_tokens", 1500}, {"ignore_eos", true}};
  for (int i = 0; i < 3; ++i) load.emplace_back([&] { post(bases[0], "/v1/completions", long_job), ++done; });
  load.emplace_back([&] { post(bases[1], "/v1/completions", long_job), ++done; });
  bool skewed = false;
  for (int i = 0; i < 400 && !skewed; ++i) {  // until the load shows in the metrics (4 s at most)
    const auto m0 = parse_metrics(get(bases[0], "/metrics").body), m1 = parse_metrics(get(bases[1], "/metrics").body);
    // (the state use shows after the scheduler's first run of a request, a little after its admission)
    skewed = series(m0, "vllm:num_requests_waiting") == 2 && series(m1, "vllm:num_requests_running") == 1 &&
             series(m1, "vllm:kv_cache_usage_perc") > 0;
    if (!skewed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(skewed) << "the load did not show in the replicas' metrics";
  TestPicker picker(bases);
  const TestPicker::Choice idle = picker.pick("A fresh question about the weather today, unrelated to anything else.");
  EXPECT_EQ(idle.replica, 2u) << "queue scores " << json(idle.queue).dump() << ", kv scores " << json(idle.kv).dump();
  EXPECT_EQ(idle.queue[2], 1.0);
  EXPECT_EQ(idle.queue[1], 1.0);  // nothing waits there either: the KV score tells them apart
  EXPECT_EQ(idle.queue[0], 0.0);
  EXPECT_LT(idle.kv[1], 1.0);  // a running sequence occupies state memory
  for (auto& t : load) t.join();
  EXPECT_EQ(done, 4);

  // A shared system prompt: every request of it goes where the first went,
  // and from the second on it is served from that replica's prompt cache.
  std::string system;
  for (int i = 0; i < 12; ++i) system += "Rule " + std::to_string(i) + ": answer briefly and politely. ";
  std::vector<size_t> chosen;
  std::vector<int64_t> cached;
  for (int q = 0; q < 5; ++q) {
    const std::string question = "Question " + std::to_string(q) + ": what is " + std::to_string(q) + " plus one?";
    const TestPicker::Choice c = picker.pick(system + question);
    chosen.push_back(c.replica);
    const json body = {{"messages", json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", question}}})},
                       {"max_tokens", 4}};
    const Reply r = post(bases[c.replica], "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    cached.push_back(r.j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>());
  }
  for (size_t q = 1; q < chosen.size(); ++q) {
    EXPECT_EQ(chosen[q], chosen[0]) << "request " << q << " left the replica holding its prefix";
    EXPECT_GT(cached[q], 0) << "request " << q << " was not served from the cache";
  }
  EXPECT_EQ(cached[0], 0);
  std::printf("prefix requests went to replica %zu; cached tokens %s\n", chosen[0], json(cached).dump().c_str());
}

// ---- HAProxy in front of three replicas -----------------------------------------------------

// A free loopback port (bound and released: a small race, fine on a test machine).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A streamed request's raw body, read to its end (or until the connection drops).
struct Stream {
  std::string content_type, body;
  bool ended_ok = false;  // the transfer completed (false: cut off)
  int reads = 0;          // pieces the body arrived in (1: buffered somewhere)
  double seconds = 0;
};

Stream stream(const std::string& base, const json& body, std::atomic<bool>* started = nullptr) {
  httplib::Client c(base);
  c.set_read_timeout(30);  // a backstop: the test's bound on a hang
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  Stream out;
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    out.body.append(data, size);
    ++out.reads;
    if (started) *started = true;
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  const auto t0 = SteadyClock::now();
  out.ended_ok = c.send(req, res, error) && res.status == 200;
  out.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  out.content_type = res.get_header_value("Content-Type");
  return out;
}

// An SSE body as its events: checks the framing ("data: <JSON>\n\n" blocks,
// "data: [DONE]" last) and returns the text the deltas carry and the finish reason.
std::string sse_text(const std::string& body) {
  std::string text, finish;
  size_t pos = 0;
  bool done = false;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "an unterminated event at byte " << pos;
    if (end == std::string::npos) break;
    const std::string block = body.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(block.rfind("data: ", 0), 0u) << block;
    EXPECT_FALSE(done) << "an event after [DONE]";
    if (block == "data: [DONE]") {
      done = true;
      continue;
    }
    const json e = json::parse(block.substr(6), nullptr, false);
    EXPECT_FALSE(e.is_discarded()) << block;
    if (e.is_discarded()) continue;
    const json& d = e["choices"][0]["delta"];
    text += d.value("reasoning_content", "") + d.value("content", "");
    if (e["choices"][0]["finish_reason"].is_string()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_TRUE(done) << "no data: [DONE]";
  return text + "|" + finish;
}

TEST(ServeScaleOut, HaproxyKeepsServingWhenAReplicaDies) {
  if (std::system("haproxy -v >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "haproxy not found (Debian's haproxy package, scripts/setup.sh)";
  auto replicas = start_replicas("haproxy", 3, {"--parallel", "2", "--context", "4096"});
  test::TempDir tmp;
  const int port = free_port();
  std::string config =
      "global\n  maxconn 256\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n"
      "  retries 3\n  option redispatch\nbackend deltagen\n  balance leastconn\n  option httpchk GET /health\n"
      "  http-check expect status 200\n  default-server inter 300ms fall 1 rise 1\n";
  for (size_t i = 0; i < replicas.size(); ++i)
    config += "  server r" + std::to_string(i) + " " + replicas[i]->base().substr(7) + " check\n";
  config += "frontend api\n  bind 127.0.0.1:" + std::to_string(port) + "\n  default_backend deltagen\n";
  {
    std::ofstream(tmp / "haproxy.cfg") << config;
  }
  const pid_t proxy = ::fork();
  if (proxy == 0) {
    const int log = ::open((tmp / "haproxy.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(log, 1), ::dup2(log, 2);
    ::execlp("haproxy", "haproxy", "-db", "-f", (tmp / "haproxy.cfg").c_str(), nullptr);
    ::_exit(127);
  }
  struct Stop {
    pid_t pid;
    ~Stop() { ::kill(pid, SIGTERM), ::waitpid(pid, nullptr, 0); }
  } stop_proxy{proxy};
  const std::string front = "http://127.0.0.1:" + std::to_string(port);
  Reply health;
  for (int i = 0; i < 200 && health.status != 200; ++i) {  // 10 s at most
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    health = get(front, "/health");
  }
  ASSERT_EQ(health.status, 200) << test::read_text(tmp / "haproxy.log");

  // SSE through the proxy is what the replica sends (greedy: the same tokens).
  // (How tokens group into events depends on timing, in the server itself:
  // compared are the framing, the text and the end, not the byte stream.)
  const json short_chat = {{"messages", json::array({{{"role", "user"}, {"content", "Name three colours."}}})},
                           {"max_tokens", 300}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true}};
  const Stream direct = stream(replicas[0]->base(), short_chat), proxied = stream(front, short_chat);
  ASSERT_TRUE(direct.ended_ok && proxied.ended_ok);
  EXPECT_EQ(proxied.content_type, direct.content_type);
  EXPECT_EQ(proxied.content_type.rfind("text/event-stream", 0), 0u);
  const std::string want = sse_text(direct.body);
  EXPECT_EQ(sse_text(proxied.body), want);
  EXPECT_EQ(want.substr(want.size() - 7), "|length");
  EXPECT_GT(proxied.reads, 10) << "the proxy buffered the stream: it came in " << proxied.reads << " pieces";

  // A replica killed mid-stream: that client's stream ends (cut off, no hang),
  // the others keep serving.
  const json long_chat = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me a very long story."}}})},
                          {"max_tokens", 3000}, {"ignore_eos", true}, {"stream", true}};
  std::atomic<bool> started{false};
  Stream cut;
  std::thread client([&] { cut = stream(front, long_chat, &started); });
  for (int i = 0; i < 1000 && !started; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(started.load());
  int victim = -1;
  for (size_t i = 0; i < replicas.size() && victim < 0; ++i)
    if (series(parse_metrics(get(replicas[i]->base(), "/metrics").body), "vllm:num_requests_running") == 1) victim = int(i);
  ASSERT_GE(victim, 0) << "no replica runs the stream";
  const auto killed_at = SteadyClock::now();
  replicas[size_t(victim)]->signal(SIGKILL);
  replicas[size_t(victim)]->wait(std::chrono::seconds(10));
  client.join();
  const double after_kill = std::chrono::duration<double>(SteadyClock::now() - killed_at).count();
  EXPECT_FALSE(cut.ended_ok) << "the stream of a killed replica finished?";
  EXPECT_EQ(cut.body.find("data: [DONE]"), std::string::npos);
  EXPECT_LT(after_kill, 5.0) << "the client hung after its replica died";
  std::atomic<int> ok{0};
  std::vector<std::thread> after;
  for (int i = 0; i < 6; ++i)
    after.emplace_back([&] {
      if (post(front, "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 8}}).status == 200) ++ok;
    });
  for (auto& t : after) t.join();
  EXPECT_EQ(ok, 6) << test::read_text(tmp / "haproxy.log");
  std::printf("killed replica %d mid-stream: its client ended %.2f s later after %zu bytes; 6/6 later requests served\n",
              victim, after_kill, cut.body.size());
}

// ---- KV events over ZeroMQ -------------------------------------------------------------------

struct KvEvent {
  uint64_t sequence = 0;
  std::string tag;
  std::vector<uint64_t> hashes;
  std::optional<uint64_t> parent;
  std::vector<int64_t> tokens;
  int64_t block_size = 0;
  std::string medium;
};

// The events of the messages that arrive within `timeout_ms` of each other.
std::vector<KvEvent> receive_events(void* socket, int timeout_ms) {
  std::vector<KvEvent> out;
  for (;;) {
    zmq_pollitem_t item{socket, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, timeout_ms) <= 0) return out;
    std::vector<std::string> parts;
    int more = 1;
    while (more) {
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      if (zmq_msg_recv(&msg, socket, 0) < 0) return out;
      parts.emplace_back(static_cast<const char*>(zmq_msg_data(&msg)), zmq_msg_size(&msg));
      more = zmq_msg_more(&msg);
      zmq_msg_close(&msg);
    }
    EXPECT_EQ(parts.size(), 3u);
    if (parts.size() != 3 || parts[1].size() != 8) continue;
    uint64_t sequence = 0;
    for (unsigned char c : parts[1]) sequence = sequence << 8 | c;
    const msgpack::object_handle handle = msgpack::unpack(parts[2].data(), parts[2].size());
    const msgpack::object& batch = handle.get();
    EXPECT_EQ(batch.via.array.size, 3u);
    EXPECT_EQ(batch.via.array.ptr[0].type, msgpack::type::FLOAT64);
    for (uint32_t i = 0; i < batch.via.array.ptr[1].via.array.size; ++i) {
      const msgpack::object& e = batch.via.array.ptr[1].via.array.ptr[i];
      KvEvent k;
      k.sequence = sequence;
      k.tag = e.via.array.ptr[0].as<std::string>();
      if (k.tag == "BlockStored") {
        k.hashes = e.via.array.ptr[1].as<std::vector<uint64_t>>();
        if (e.via.array.ptr[2].type != msgpack::type::NIL) k.parent = e.via.array.ptr[2].as<uint64_t>();
        k.tokens = e.via.array.ptr[3].as<std::vector<int64_t>>();
        k.block_size = e.via.array.ptr[4].as<int64_t>();
        k.medium = e.via.array.ptr[6].as<std::string>();
      } else if (k.tag == "BlockRemoved") {
        k.hashes = e.via.array.ptr[1].as<std::vector<uint64_t>>();
        k.medium = e.via.array.ptr[2].as<std::string>();
      }
      out.push_back(std::move(k));
    }
  }
}

TEST(ServeKvEvents, SubscriberDecodesTheCachesChanges) {
  // Snapshots every 16 tokens, 1 MB of cache: a few prompts' worth on this model.
  Server s("kv-events", {"--parallel", "1", "--checkpoint-every", "16", "--block-size", "16", "--cache-mb", "1",
                         "--kv-events", "tcp://127.0.0.1:*", "--kv-events-topic", "kv@test@tiny"});
  const std::smatch m = s.wait_for_log(std::regex(R"(KV events on (tcp://127\.0\.0\.1:\d+))"), std::chrono::seconds(5));
  ASSERT_FALSE(m.empty()) << s.log();
  void* context = zmq_ctx_new();
  void* sub = zmq_socket(context, ZMQ_SUB);
  ASSERT_EQ(zmq_connect(sub, std::string(m[1]).c_str()), 0);
  ASSERT_EQ(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "kv@test@", 8), 0);
  // The subscription reaches the publisher asynchronously: reset the cache
  // until its AllBlocksCleared arrives (bounded), then everything after it is seen.
  bool joined = false;
  for (int i = 0; i < 50 && !joined; ++i) {
    ASSERT_EQ(post(s.base(), "/reset_prefix_cache", json::object()).status, 200);
    for (const KvEvent& e : receive_events(sub, 100)) joined |= e.tag == "AllBlocksCleared";
  }
  ASSERT_TRUE(joined) << "no AllBlocksCleared reached the subscriber";
  receive_events(sub, 100);

  std::string words;
  for (int i = 0; i < 40; ++i) words += "word" + std::to_string(i) + " ";
  const json request = {{"prompt", words}, {"max_tokens", 1}};
  const Reply render = post(s.base(), "/v1/completions/render", request);
  ASSERT_EQ(render.status, 200) << render.body;
  const auto ids = render.j["token_ids"].get<std::vector<int64_t>>();
  ASSERT_GE(ids.size(), 48u);
  ASSERT_EQ(post(s.base(), "/v1/completions", request).status, 200);
  std::vector<KvEvent> events = receive_events(sub, 1000);
  // Stored: the prompt's whole blocks (a snapshot every 16 tokens), in order, chained.
  std::vector<int64_t> stored_tokens;
  std::vector<uint64_t> chain;
  uint64_t last_sequence = 0;
  for (const KvEvent& e : events) {
    EXPECT_GT(e.sequence, last_sequence);
    last_sequence = e.sequence;
    ASSERT_EQ(e.tag, "BlockStored");
    EXPECT_EQ(e.block_size, 16);
    EXPECT_EQ(e.medium, "CPU");
    EXPECT_EQ(e.tokens.size(), e.hashes.size() * 16);
    if (chain.empty()) EXPECT_FALSE(e.parent.has_value());
    else EXPECT_EQ(e.parent, chain.back());
    chain.insert(chain.end(), e.hashes.begin(), e.hashes.end());
    stored_tokens.insert(stored_tokens.end(), e.tokens.begin(), e.tokens.end());
  }
  const size_t whole = ids.size() / 16 * 16;
  EXPECT_EQ(stored_tokens, std::vector<int64_t>(ids.begin(), ids.begin() + ptrdiff_t(whole)));

  // Other prompts fill the 1 MB: older snapshots are evicted, and their blocks removed.
  std::set<uint64_t> stored(chain.begin(), chain.end()), removed;
  for (int round = 0; round < 30 && removed.empty(); ++round) {
    const json other = {{"prompt", "Round " + std::to_string(round) + ": " + words}, {"max_tokens", 1}};
    ASSERT_EQ(post(s.base(), "/v1/completions", other).status, 200);
    for (const KvEvent& e : receive_events(sub, 300)) {
      EXPECT_EQ(e.sequence, last_sequence + 1) << "a message was lost";
      last_sequence = e.sequence;
      if (e.tag == "BlockStored") stored.insert(e.hashes.begin(), e.hashes.end());
      if (e.tag == "BlockRemoved") {
        for (uint64_t h : e.hashes) EXPECT_TRUE(stored.count(h)) << "removed a block never stored";
        removed.insert(e.hashes.begin(), e.hashes.end());
      }
    }
  }
  EXPECT_FALSE(removed.empty()) << "30 prompts never evicted a snapshot from 1 MB";
  const auto metrics = parse_metrics(get(s.base(), "/metrics").body);
  EXPECT_GT(series(metrics, "deltagen_prompt_cache_evictions_total"), 0);

  ASSERT_EQ(post(s.base(), "/reset_prefix_cache", json::object()).status, 200);
  const std::vector<KvEvent> reset = receive_events(sub, 1000);
  ASSERT_EQ(reset.size(), 1u);
  EXPECT_EQ(reset[0].tag, "AllBlocksCleared");
  EXPECT_EQ(reset[0].sequence, last_sequence + 1);
  zmq_close(sub);
  zmq_ctx_term(context);
}

}  // namespace
}  // namespace deltagen
