// deltagen serve --model DIR [--host 127.0.0.1] [--port 8080] [--parallel 4 (1 with a device --ep)]
//                [--context N] [--prefill-chunk 256] [--max-queue 64]
//                [--cache-mb 4096] [--cache-dir DIR] [--cache-disk-mb 16384] [--no-cache]
//                [--checkpoint-every 2048] [--load-state F] [--api-key KEY] [--alias NAME]
//                [--chat-template FILE] [--threads T] [--kernels K] [--ep cpu|webgpu|cuda] [--max-body-mb 16]
//                [--max-images 16] [--max-image-mb 20] [--speculative none|ngram|mtp] [--draft-tokens 3]
//                [--drain-seconds 0] [--block-size 16] [--kv-events ENDPOINT [--kv-events-connect]
//                [--kv-events-topic T]]
//
// An OpenAI-compatible server (docs/serve.md) with a web chat page at /.
// --api-key may also come from DELTAGEN_API_KEY (keeps it out of `ps`).
// It listens before the model is loaded (/health 503 until it is: a router
// sees a replica that is coming up) and prints "listening on URL" on stdout
// once it serves.
// SIGINT / SIGTERM: /health turns 503 and new requests are refused; those in
// flight get up to --drain-seconds to finish, then they end (their streams
// are closed properly) and the process exits 0.
// --kv-events: the prompt cache's changes for prefix-aware routers
// (serve/kv_events.h, docs/scale-out.md).
#include <pthread.h>
#include <signal.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "deltagen/deltagen.h"
#include "serve/http_server.h"
#include "serve/kv_events.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/generation_flags.h"

namespace deltagen {
namespace {

int64_t megabytes(Args& args, const std::string& flag, int64_t fallback) {
  const int64_t mb = args.get_int(flag, fallback);
  if (mb < 0 || mb > (int64_t(1) << 30)) fail("--" + flag, "must be a number of megabytes");
  return mb << 20;
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  // Every thread (ONNX Runtime's, the scheduler's, the connections') starts
  // with these blocked: only the watcher below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a death

  Args args(argc, argv, {"no-cache", "kv-events-connect"});
  const std::string model_dir = args.require("model");
  EngineOptions engine_options = parse_engine_flags(args);

  serve::HttpOptions http;
  http.host = args.get_or("host", "127.0.0.1");
  const int64_t port = args.get_int("port", 8080);
  if (port < 0 || port > 65535) fail("--port", "must be between 0 and 65535");
  http.port = int(port);
  const char* env_key = std::getenv("DELTAGEN_API_KEY");
  http.api_key = args.get_or("api-key", env_key ? env_key : "");
  http.max_body_bytes = size_t(megabytes(args, "max-body-mb", 16));
  if (http.max_body_bytes == 0) fail("--max-body-mb", "must be at least 1");

  serve::SchedulerOptions s;
  s.parallel = args.get_int("parallel", 0);  // 0: 4 on the CPU, 1 on a device provider
  s.max_length = args.get_int("context", 0);
  if (s.max_length < 0) fail("--context", "must be a positive number of tokens");
  if (engine_options.max_length == 0) engine_options.max_length = s.max_length;
  s.prefill_chunk = args.get_int("prefill-chunk", 256);
  s.max_queue = args.get_int("max-queue", 64);
  s.checkpoint_every = args.get_int("checkpoint-every", 2048);
  s.cache = !args.flag("no-cache");
  s.cache_options.memory_bytes = megabytes(args, "cache-mb", 4096);
  s.cache_options.spill_dir = args.get_or("cache-dir", "");
  s.cache_options.disk_bytes = megabytes(args, "cache-disk-mb", 16384);
  if (auto method = args.get("speculative")) s.speculative.method = parse_speculative_method(*method);
  s.speculative.draft_tokens = args.get_int("draft-tokens", s.speculative.draft_tokens);
  validate_speculative(s.speculative);
  engine_options.idle_threads_sleep = s.speculative.method == SpeculativeMethod::Mtp;  // two sessions take turns
  const std::string load_state = args.get_or("load-state", "");
  const std::string template_file = args.get_or("chat-template", "");
  const std::string alias = args.get_or("alias", "");
  // Images (a --vision model): per request, and each one's decoded size.
  const int64_t max_images = args.get_int("max-images", 16);
  if (max_images < 0) fail("--max-images", "must not be negative");
  const int64_t max_image_bytes = megabytes(args, "max-image-mb", 20);
  if (max_image_bytes == 0) fail("--max-image-mb", "must be at least 1");
  const int64_t drain_seconds = args.get_int("drain-seconds", 0);
  if (drain_seconds < 0 || drain_seconds > 3600) fail("--drain-seconds", "must be between 0 and 3600");
  s.block_size = args.get_int("block-size", 16);
  if (s.block_size < 1 || s.block_size > 4096) fail("--block-size", "must be between 1 and 4096 tokens");
  serve::KvEventOptions kv_events;
  kv_events.endpoint = args.get_or("kv-events", "");
  kv_events.connect = args.flag("kv-events-connect");
  kv_events.topic = args.get_or("kv-events-topic", "");
  kv_events.block_size = s.block_size;
  if (kv_events.endpoint.empty() && (kv_events.connect || !kv_events.topic.empty()))
    fail("--kv-events", "--kv-events-connect and --kv-events-topic need --kv-events ENDPOINT");
  if (!kv_events.endpoint.empty() && !s.cache) fail("--kv-events", "publishes the prompt cache's changes: drop --no-cache");
  args.finish();
  // A thread per connection being answered: every row, the queue, and a few
  // for /health and /metrics (0 rows: the scheduler's default, at most 4).
  http.threads = int((s.parallel > 0 ? s.parallel : 4) + std::max<int64_t>(0, s.max_queue) + 8);

  // Listen first: while the model loads, /health says 503 (a router's
  // readiness probe waits), then the same socket serves.
  serve::HttpServer server(http);
  const int bound = server.bind();
  std::fprintf(stderr, "[serve] loading %s on http://%s:%d\n", model_dir.c_str(), http.host.c_str(), bound);
  std::atomic<serve::Scheduler*> serving{nullptr};
  std::atomic<bool> signalled{false}, ended{false};
  std::thread http_thread([&] { server.run(); });
  std::thread watcher([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    if (ended) return;  // woken by the normal end below
    signalled = true;
    std::fprintf(stderr, "[serve] %s: draining (up to %llds), then ending in-flight requests\n",
                 signal == SIGINT ? "SIGINT" : "SIGTERM", (long long)drain_seconds);
    server.drain();
    if (serve::Scheduler* scheduler = serving.load()) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(drain_seconds);
      while (std::chrono::steady_clock::now() < deadline) {
        const serve::SchedulerStats st = scheduler->stats();
        if (st.running == 0 && st.queued == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      scheduler->stop();
    }
    server.stop();
  });
  // Whatever happens below (a model that does not load throws), both threads end before this returns.
  struct Join {
    serve::HttpServer& server;
    std::atomic<bool>& ended;
    std::thread &http, &watcher;
    ~Join() {
      ended = true;
      server.stop();
      if (http.joinable()) http.join();
      if (watcher.joinable()) {
        pthread_kill(watcher.native_handle(), SIGTERM);  // wake the watcher if no signal did
        watcher.join();
      }
    }
  } join{server, ended, http_thread, watcher};

  std::shared_ptr<serve::KvEventPublisher> publisher;
  if (!kv_events.endpoint.empty()) {
    if (kv_events.topic.empty()) {
      // llm-d's subscriber reads "kv@<pod>@<model>" (its vLLM adapter splits on '@').
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      const std::string model = alias.empty() ? std::filesystem::absolute(model_dir).lexically_normal().filename().string() : alias;
      kv_events.topic = "kv@" + std::string(host) + "@" + model;
    }
    publisher = std::make_shared<serve::KvEventPublisher>(kv_events);
    s.cache_options.listener = publisher;
    std::fprintf(stderr, "[serve] KV events on %s (topic %s, block size %lld)\n", publisher->endpoint().c_str(),
                 kv_events.topic.c_str(), (long long)kv_events.block_size);
  }

  std::shared_ptr<Engine> engine = Engine::load(model_dir, engine_options);
  if (!engine->has_tokenizer()) fail(model_dir, "the server needs a tokenizer.json in the model folder");
  ChatTemplate chat_template = ChatTemplate::for_model(model_dir);
  if (!template_file.empty()) {
    std::ifstream in(template_file, std::ios::binary);
    if (!in) fail(template_file, "cannot read the chat template");
    chat_template = ChatTemplate::from_source(std::string(std::istreambuf_iterator<char>(in), {}), template_file);
  }
  serve::Scheduler scheduler(engine, s);
  if (!load_state.empty()) scheduler.warm_cache(Snapshot::load(load_state));
  std::string folder = std::filesystem::absolute(model_dir).lexically_normal().filename().string();
  if (folder.empty()) folder = std::filesystem::absolute(model_dir).lexically_normal().parent_path().filename().string();
  const std::string name = alias.empty() ? folder : alias;
  serve::Service service(engine, std::move(chat_template), scheduler, {name, max_images, max_image_bytes, folder});
  if (signalled) {  // stopped while loading
    scheduler.stop();
    std::fprintf(stderr, "[serve] stopped\n");
    return 0;
  }
  serving = &scheduler;
  server.attach(service);
  std::fprintf(stderr, "[serve] %s on http://%s:%d (parallel %lld, context %lld, chat template %s, cache %s, speculative %s)\n",
               name.c_str(), http.host.c_str(), bound, (long long)s.parallel, (long long)scheduler.max_length(),
               service.chat_template().name().c_str(), s.cache ? "on" : "off",
               speculative_method_name(s.speculative.method));
  std::printf("listening on http://%s:%d\n", http.host.c_str(), bound);
  std::fflush(stdout);
  http_thread.join();  // until stop()
  ended = true;
  pthread_kill(watcher.native_handle(), SIGTERM);  // wake the watcher if no signal did
  watcher.join();      // before the scheduler it may be draining goes
  scheduler.stop();
  std::fprintf(stderr, "[serve] stopped\n");
  return 0;
}

}  // namespace deltagen
