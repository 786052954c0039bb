#include "serve/http_server.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <random>
#include <thread>

#include <httplib.h>

#include "serve/web_page.h"

namespace deltagen::serve {
using nlohmann::ordered_json;

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(100);  // how often a waiting handler looks at its client
constexpr auto kKeepAlive = std::chrono::seconds(10);   // an SSE comment when nothing else was sent

// The socket a request came on, found by its two addresses among the
// process's open sockets: cpp-httplib 0.11 hands handlers no socket, and a
// handler must notice a client that went away while its reply is generated.
// -1 when not found (the request is then never seen as abandoned).
int connection_socket(const httplib::Request& req) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (dirent* entry = ::readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    if (fd <= 2) continue;
    sockaddr_storage peer{}, local{};
    socklen_t peer_size = sizeof peer, local_size = sizeof local;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0)
      continue;
    char host[NI_MAXHOST], port[NI_MAXSERV], local_port[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&peer), peer_size, host, sizeof host, port, sizeof port,
                      NI_NUMERICHOST | NI_NUMERICSERV) != 0 ||
        ::getnameinfo(reinterpret_cast<sockaddr*>(&local), local_size, nullptr, 0, local_port, sizeof local_port,
                      NI_NUMERICSERV) != 0)
      continue;
    if (req.remote_addr == host && req.remote_port == std::atoi(port) && req.local_port == std::atoi(local_port)) {
      found = fd;
      break;
    }
  }
  ::closedir(dir);
  return found;
}

// The peer closed the connection (or reset it): nothing we write will arrive.
bool client_gone(int socket) {
  if (socket < 0) return false;
  pollfd p{socket, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
  char c;
  return ::recv(socket, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

std::string dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const ordered_json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json; charset=utf-8");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, e.status, error_json(e.what(), e.type, e.param, e.code));
}

bool write_sse(httplib::DataSink& sink, const ordered_json& chunk) {
  const std::string line = "data: " + dump(chunk) + "\n\n";
  return sink.write(line.data(), line.size());
}

bool write_text(httplib::DataSink& sink, std::string_view text) { return sink.write(text.data(), text.size()); }

// x-request-id: a router's id for the request, echoed so its logs and ours
// meet. Printable ASCII without spaces, at most this long: anything else
// could not be echoed safely in a header.
constexpr size_t kMaxRequestId = 256;

bool valid_request_id(const std::string& id) {
  if (id.empty() || id.size() > kMaxRequestId) return false;
  return std::all_of(id.begin(), id.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::string new_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char id[40];
  std::snprintf(id, sizeof id, "req-%016llx%016llx", (unsigned long long)rng(), (unsigned long long)rng());
  return id;
}

// One submitted sequence answered as a whole or as an SSE stream. `Reply`
// is ChatReply or TextReply.
template <class Reply>
struct Answer {
  std::shared_ptr<SequenceStream> sequence;
  Reply reply;
  bool include_usage = false;
  int socket = -1;  // the client's connection
  bool started = false;
  Clock::time_point last_write = Clock::now();
};

template <class Reply>
void answer_whole(Answer<Reply>& a, httplib::Response& res) {
  std::vector<TokenEvent> events;
  std::optional<SequenceEnd> end;
  while (!(end = a.sequence->wait(events, kPoll)))
    if (client_gone(a.socket)) a.sequence->cancel();
  a.reply.push(events);
  a.reply.finish(*end);
  if (!end->error.empty()) return send_error(res, ApiError(500, "server_error", "", end->error));
  send_json(res, 200, a.reply.completion(*end));
}

template <class Reply>
void answer_stream(std::shared_ptr<Answer<Reply>> a, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  auto provider = [a](size_t, httplib::DataSink& sink) {
    bool ok = true;
    if (!a->started) {
      a->started = true;
      if constexpr (std::is_same_v<Reply, ChatReply>) ok = write_sse(sink, a->reply.role_chunk());
    }
    std::vector<TokenEvent> events;
    const std::optional<SequenceEnd> end = a->sequence->wait(events, kPoll);
    for (const ordered_json& chunk : a->reply.push(events)) ok = ok && write_sse(sink, chunk);
    if (end) {
      if (!end->error.empty()) {
        ok = ok && write_sse(sink, error_json(end->error, "server_error", "", ""));
      } else {
        for (const ordered_json& chunk : a->reply.finish(*end)) ok = ok && write_sse(sink, chunk);
        if (a->include_usage) ok = ok && write_sse(sink, a->reply.usage_chunk(*end));
      }
      ok = ok && write_text(sink, "data: [DONE]\n\n");
      if (ok) sink.done();
      return ok;
    }
    if (!events.empty()) a->last_write = Clock::now();
    else if (Clock::now() - a->last_write > kKeepAlive) {
      ok = ok && write_text(sink, ": keep-alive\n\n");
      a->last_write = Clock::now();
    }
    if (!ok || client_gone(a->socket)) {
      a->sequence->cancel();
      return false;
    }
    return true;
  };
  // A stream that ends early (the client went away, the server stops) cancels its sequence.
  res.set_chunked_content_provider("text/event-stream", provider, [a](bool) { a->sequence->cancel(); });
}

}  // namespace

bool keys_match(const std::string& key, const std::string& expected) {
  unsigned char differ = key.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) differ |= uint8_t(uint8_t(i < key.size() ? key[i] : 0) ^ uint8_t(expected[i]));
  return differ == 0;
}

enum class Phase { Loading, Ready, Draining };

struct HttpServer::Impl {
  explicit Impl(HttpOptions o) : options(std::move(o)) {}

  std::atomic<Service*> attached{nullptr};
  std::atomic<Phase> phase{Phase::Loading};
  // run() and stop() may come from two threads in either order (a model
  // that fails to load stops a server whose thread has barely started):
  // cpp-httplib's stop() does nothing before its listen loop runs.
  std::atomic<bool> run_called{false}, run_returned{false}, stop_requested{false};
  HttpOptions options;
  httplib::Server server;

  // The service, once loaded; 503 before.
  Service& service() const {
    Service* s = attached.load();
    if (!s) throw ApiError(503, "server_loading", "", "the model is still loading");
    return *s;
  }
  // The service for new work: 503 while loading or draining.
  Service& open_service() const {
    Service& s = service();
    if (phase.load() == Phase::Draining) throw ApiError(503, "server_busy", "", "the server is shutting down");
    return s;
  }

  bool authorized(const httplib::Request& req) const {
    if (options.api_key.empty()) return true;
    const std::string header = req.get_header_value("Authorization");
    static constexpr std::string_view kBearer = "Bearer ";
    const std::string key = header.compare(0, kBearer.size(), kBearer) == 0 ? header.substr(kBearer.size()) : std::string();
    return keys_match(key, options.api_key);
  }

  // Runs `handle`, turning every error into an OpenAI error response.
  template <class Handle>
  void guarded(const httplib::Request& req, httplib::Response& res, bool needs_key, Handle handle) {
    try {
      if (needs_key && !authorized(req))
        throw ApiError(401, "authentication_error", "", "a valid API key is required (Authorization: Bearer KEY)",
                       "invalid_api_key");
      handle();
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Busy& e) {
      send_error(res, ApiError(503, "server_busy", "", e.what()));
    } catch (const Error& e) {
      // Checks the scheduler makes for itself (ids, lengths): the request's fault.
      send_error(res, ApiError(400, "invalid_request_error", "", e.what()));
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, "server_error", "", std::string("internal error: ") + e.what()));
    }
  }

  void chat(const httplib::Request& req, httplib::Response& res) {
    Service& service = open_service();
    PreparedChat p = service.prepare_chat(req.body);
    // The reply's parser reads the tools' schemas (to type arguments) when it is made.
    p.parser.tools = p.params.tools.is_null() ? nullptr : &p.params.tools;
    auto a = std::make_shared<Answer<ChatReply>>(Answer<ChatReply>{
        service.scheduler().submit(std::move(p.sequence)),
        ChatReply(p.header, service.tokenizer(), p.parser, p.params.top_logprobs >= 0), p.params.include_usage,
        connection_socket(req)});
    if (p.params.stream) answer_stream(a, res);
    else answer_whole(*a, res);
  }

  void text(const httplib::Request& req, httplib::Response& res) {
    Service& service = open_service();
    PreparedText p = service.prepare_text(req.body);
    auto a = std::make_shared<Answer<TextReply>>(
        Answer<TextReply>{service.scheduler().submit(std::move(p.sequence)),
                          TextReply(p.header, &service.tokenizer(), p.echo, p.params.top_logprobs), p.params.include_usage,
                          connection_socket(req)});
    if (p.params.stream) answer_stream(a, res);
    else answer_whole(*a, res);
  }

  void routes() {
    using httplib::Request;
    using httplib::Response;
    server.Post("/v1/chat/completions", [this](const Request& q, Response& r) { guarded(q, r, true, [&] { chat(q, r); }); });
    server.Post("/chat/completions", [this](const Request& q, Response& r) { guarded(q, r, true, [&] { chat(q, r); }); });
    server.Post("/v1/completions", [this](const Request& q, Response& r) { guarded(q, r, true, [&] { text(q, r); }); });
    server.Post("/completions", [this](const Request& q, Response& r) { guarded(q, r, true, [&] { text(q, r); }); });
    // The render twins: the prompt ids of a request, checked like the real one, not run.
    for (const char* route : {"/v1/chat/completions/render", "/chat/completions/render"})
      server.Post(route, [this](const Request& q, Response& r) {
        guarded(q, r, true, [&] { send_json(r, 200, service().render_chat(q.body)); });
      });
    for (const char* route : {"/v1/completions/render", "/completions/render"})
      server.Post(route, [this](const Request& q, Response& r) {
        guarded(q, r, true, [&] { send_json(r, 200, service().render_text(q.body)); });
      });
    server.Get("/v1/models", [this](const Request& q, Response& r) {
      guarded(q, r, true, [&] { send_json(r, 200, service().models()); });
    });
    server.Post("/tokenize", [this](const Request& q, Response& r) {
      guarded(q, r, true, [&] { send_json(r, 200, service().tokenize(q.body)); });
    });
    server.Post("/detokenize", [this](const Request& q, Response& r) {
      guarded(q, r, true, [&] { send_json(r, 200, service().detokenize(q.body)); });
    });
    // vLLM's route: drop the prompt cache (KV-event subscribers hear AllBlocksCleared).
    server.Post("/reset_prefix_cache", [this](const Request& q, Response& r) {
      guarded(q, r, true, [&] {
        if (!service().scheduler().reset_cache())
          throw ApiError(400, "invalid_request_error", "", "the prompt cache is off (--no-cache)");
        send_json(r, 200, {{"status", "ok"}});
      });
    });
    server.Get("/metrics", [this](const Request& q, Response& r) {
      guarded(q, r, true, [&] { r.set_content(service().metrics(), "text/plain; version=0.0.4"); });
    });
    server.Get("/version", [this](const Request& q, Response& r) {
      guarded(q, r, false, [&] { send_json(r, 200, service().version()); });
    });
    // 200 only when requests are taken: a router's readiness probe.
    server.Get("/health", [this](const Request&, Response& r) {
      const Phase p = phase.load();
      if (p == Phase::Ready) return send_json(r, 200, {{"status", "ok"}});
      r.set_header("Retry-After", "1");
      send_json(r, 503, {{"status", p == Phase::Loading ? "loading" : "draining"}});
    });
    server.Get("/", [](const Request&, Response& r) {
      r.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
    });
    // CORS: browser apps on other origins may call the API (the key still guards it).
    server.Options(R"(/.*)", [](const Request&, Response& r) {
      r.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id");
      r.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      r.status = 204;
    });
    server.set_default_headers({{"Access-Control-Allow-Origin", "*"}, {"Access-Control-Expose-Headers", "X-Request-Id"},
                                {"Server", "deltagen"}});
    // Before any route: every answer (errors and 404s too) carries the request's id.
    server.set_pre_routing_handler([](const Request& q, Response& r) {
      const std::string id = q.get_header_value("x-request-id");
      if (!q.has_header("x-request-id")) {
        r.set_header("x-request-id", new_request_id());
        return httplib::Server::HandlerResponse::Unhandled;
      }
      if (valid_request_id(id)) {
        r.set_header("x-request-id", id);
        return httplib::Server::HandlerResponse::Unhandled;
      }
      r.set_header("x-request-id", new_request_id());
      send_error(r, ApiError(400, "invalid_request_error", "x-request-id",
                             "x-request-id must be 1 to " + std::to_string(kMaxRequestId) +
                                 " printable ASCII characters without spaces"));
      return httplib::Server::HandlerResponse::Handled;
    });
    server.set_error_handler([](const Request& q, Response& r) {
      if (r.status == 404) send_error(r, ApiError(404, "not_found_error", "", "no route for " + q.method + " " + q.path));
      else if (r.status == 413) send_error(r, ApiError(413, "invalid_request_error", "", "the request body is too large"));
      else if (r.body.empty()) send_error(r, ApiError(r.status, "invalid_request_error", "", "bad request"));
    });
    server.set_exception_handler([](const Request&, Response& r, std::exception_ptr) {
      send_error(r, ApiError(500, "server_error", "", "internal error"));
    });
    server.set_logger([this](const Request& q, const Response& r) {
      if (Service* s = attached.load()) s->count_response(r.status);
      std::fprintf(stderr, "[serve] %s %s %d %s\n", q.method.c_str(), q.path.c_str(), r.status,
                   r.get_header_value("x-request-id").c_str());
    });
  }
};

namespace {

// A thread per connection being answered: every row, the queue, and a few
// for /health and /metrics. Connections past that wait to be accepted.
HttpOptions with_threads(HttpOptions o, const SchedulerOptions& s) {
  if (o.threads <= 0) o.threads = int(s.parallel + s.max_queue + 8);
  return o;
}

}  // namespace

HttpServer::HttpServer(Service& service, HttpOptions options)
    : HttpServer(with_threads(std::move(options), service.scheduler().options())) {
  attach(service);
}

HttpServer::HttpServer(HttpOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  const HttpOptions& o = impl_->options;
  // Without a count: enough for the default scheduler (4 rows, a queue of 64)
  // and a few for /health and /metrics; cmd_serve passes its own.
  const size_t threads = o.threads > 0 ? size_t(o.threads) : size_t(4 + 64 + 8);
  impl_->server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl_->server.set_payload_max_length(o.max_body_bytes);
  impl_->server.set_read_timeout(30);
  impl_->server.set_write_timeout(30);
  impl_->server.set_keep_alive_timeout(2);
  impl_->routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const HttpOptions& o = impl_->options;
  if (o.port == 0) {
    const int port = impl_->server.bind_to_any_port(o.host);
    if (port <= 0) fail(o.host, "cannot listen on any port of this address");
    return port;
  }
  if (!impl_->server.bind_to_port(o.host, o.port))
    fail(o.host + ":" + std::to_string(o.port), "cannot listen there (in use, or not an address of this machine)");
  return o.port;
}

void HttpServer::run() {
  impl_->run_called = true;
  if (!impl_->stop_requested) impl_->server.listen_after_bind();
  impl_->run_returned = true;
}

void HttpServer::stop() {
  Impl& i = *impl_;
  i.stop_requested = true;
  // A run() on its way into the listen loop: wait until it is in (or out), at most 5 s.
  for (int k = 0; k < 5000 && i.run_called && !i.run_returned && !i.server.is_running(); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  i.server.stop();
}

void HttpServer::attach(Service& service) {
  impl_->attached.store(&service);
  Phase loading = Phase::Loading;
  impl_->phase.compare_exchange_strong(loading, Phase::Ready);  // a drain that came first stays
}

void HttpServer::drain() { impl_->phase.store(Phase::Draining); }

}  // namespace deltagen::serve
