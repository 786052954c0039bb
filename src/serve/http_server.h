// The HTTP transport of `deltagen serve`, on cpp-httplib (Debian's
// libcpp-httplib-dev, the library llama-server embeds): routes to the
// Service, bearer-key auth, SSE streaming, CORS, bounded bodies and
// connection threads, and disconnect detection (a client that goes away
// cancels its sequence at the next step, streamed or not).
//
// Routes: POST /v1/chat/completions, /v1/completions, their /render twins
// (the prompt ids, not run), /tokenize, /detokenize, /reset_prefix_cache;
// GET /v1/models, /health, /version, /metrics, / (the chat page).
//
// Phases, for a router's health checks: the server may listen before the
// model is loaded (loading: /health and the API answer 503), then serves
// (ready: /health 200), then drains on SIGTERM (draining: /health and new
// requests 503 while the ones in flight finish). Every response carries
// x-request-id: the request's own (echoed) or one made up.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "serve/service.h"

namespace deltagen::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;              // 0: any free port (bind() says which)
  std::string api_key;          // empty: no auth
  size_t max_body_bytes = size_t(16) << 20;
  int threads = 0;              // connection threads; 0 = enough for every row and the queue
};

class HttpServer {
 public:
  // Ready at once.
  HttpServer(Service& service, HttpOptions options);
  // Loading until attach().
  explicit HttpServer(HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the address; returns the port. Throws Error when it cannot.
  int bind();
  // Serves until stop(); returns then.
  void run();
  // From any thread (the signal watcher): stop accepting, end open streams.
  void stop();

  // The model is loaded: serve it (from any thread, once).
  void attach(Service& service);
  // Stop taking new work (503) and fail /health; what runs goes on.
  void drain();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether `key` equals `expected`, in time that does not depend on where
// they differ (a key guessed byte by byte learns nothing from timing).
bool keys_match(const std::string& key, const std::string& expected);

}  // namespace deltagen::serve
