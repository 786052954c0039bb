#include "measure/serve_bench.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <latch>
#include <thread>

#include <httplib.h>

#include "deltagen/error.h"
#include "measure/progress.h"
#include "runtime/genai_config.h"
#include "tokenizer/tokenizer.h"

namespace deltagen::measure {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

// ---- the client -------------------------------------------------------------------------------

// POSTs `body` and returns the JSON answer; Error naming the route when the
// server does not answer 200.
ordered_json post_json(int port, const std::string& route, const ordered_json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(600);
  const httplib::Result r = client.Post(route, body.dump(), "application/json");
  if (!r) fail("bench-serve", route + ": no answer from the server");
  if (r->status != 200) fail("bench-serve", route + ": HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300));
  return ordered_json::parse(r->body);
}

std::string get_metrics(int port) {
  httplib::Client client("127.0.0.1", port);
  const httplib::Result r = client.Get("/metrics");
  if (!r || r->status != 200) fail("bench-serve", "/metrics: no answer from the server");
  return r->body;
}

// The value of the /metrics sample named exactly `series` (name and labels); 0 when absent.
double metric_value(const std::string& metrics, const std::string& series) {
  const std::string key = series + " ";
  for (size_t at = metrics.find(key); at != std::string::npos; at = metrics.find(key, at + 1))
    if (at == 0 || metrics[at - 1] == '\n') return std::strtod(metrics.c_str() + at + key.size(), nullptr);
  return 0;
}

std::vector<int64_t> random_prompt(int64_t length, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(length));
  for (int64_t& id : ids) id = int64_t(rng() % uint32_t(std::min<int64_t>(vocab, 100000)));
  return ids;
}

// ---- streams -----------------------------------------------------------------------------

std::vector<StreamsRow> bench_streams(const StartBenchServer& start, int64_t vocab, const ServeBenchOptions& o,
                                      Progress& progress) {
  std::vector<StreamsRow> rows;
  for (int64_t k : o.streams) {
    StreamsRow row;
    row.streams = k;
    const std::unique_ptr<BenchServer> server = start({.parallel = k, .cache = false});
    const std::string steps_series = "deltagen_decode_steps_by_rows_total{rows=\"" + std::to_string(k) + "\"}";
    const std::string seconds_series = "deltagen_decode_seconds_by_rows_total{rows=\"" + std::to_string(k) + "\"}";
    for (int64_t run = 0; run < std::max<int64_t>(1, o.runs); ++run) {
      progress.show("bench-serve: " + std::to_string(k) + " streams, run " + std::to_string(run + 1), true);
      const std::string before = get_metrics(server->port());
      std::vector<std::string> errors(static_cast<size_t>(k));
      std::vector<std::thread> clients;
      std::latch ready(k);  // the k requests leave together, so that their decoding overlaps
      for (int64_t i = 0; i < k; ++i)
        clients.emplace_back([&, i] {
          const ordered_json body = {{"prompt", random_prompt(o.prompt_tokens, vocab, uint32_t(run * 100 + i))},
                                     {"max_tokens", o.gen_tokens},
                                     {"temperature", 0},
                                     {"ignore_eos", true}};
          ready.arrive_and_wait();
          try {
            post_json(server->port(), "/v1/completions", body);
          } catch (const std::exception& e) {
            errors[size_t(i)] = e.what();
          }
        });
      for (std::thread& c : clients) c.join();
      for (const std::string& e : errors)
        if (!e.empty()) fail("bench-serve", e);
      // Only the steps that ran all k sequences (the server counts steps by
      // their width): the steady state, not the ramp while the prompts are
      // still being prefilled.
      const std::string after = get_metrics(server->port());
      const double steps = metric_value(after, steps_series) - metric_value(before, steps_series);
      const double seconds = metric_value(after, seconds_series) - metric_value(before, seconds_series);
      if (steps > 0 && seconds > 0 && double(k) * steps / seconds > row.decode_tokens_per_second) {
        row.decode_tokens_per_second = double(k) * steps / seconds;
        row.step_ms = seconds / steps * 1000;
      }
    }
    rows.push_back(row);
  }
  for (StreamsRow& r : rows)
    if (!rows.empty() && rows[0].decode_tokens_per_second > 0)
      r.speedup = r.decode_tokens_per_second / rows[0].decode_tokens_per_second;
  return rows;
}

// ---- turns ------------------------------------------------------------------------------------

// User turns of about `tokens` tokens each: the text file's words in order,
// or a built-in pseudo-English stream.
class TurnText {
 public:
  TurnText(const Tokenizer& tokenizer, const std::filesystem::path& file) : tokenizer_(tokenizer) {
    if (!file.empty()) {
      std::ifstream in(file);
      if (!in) fail(file.string(), "cannot read the text");
      for (std::string w; in >> w;) words_.push_back(w);
      if (words_.empty()) fail(file.string(), "holds no words");
    } else {
      static const char* kWords[] = {"the", "model", "reads", "a", "long", "history", "of", "messages", "and",
                                     "answers", "only", "what", "is", "new", "while", "its", "state", "stays",
                                     "cached", "between", "turns", "so", "that", "time", "to", "first", "token",
                                     "remains", "flat", "as", "conversation", "grows"};
      std::mt19937 rng(7);
      for (int i = 0; i < 200000; ++i) words_.push_back(kWords[rng() % (sizeof kWords / sizeof *kWords)]);
    }
  }

  std::string next(int64_t tokens) {
    std::string text;
    while (int64_t(tokenizer_.encode(text).size()) < tokens) {
      for (int i = 0; i < 16; ++i) {
        if (!text.empty()) text += ' ';
        text += words_[pos_++ % words_.size()];
      }
    }
    return text;
  }

 private:
  const Tokenizer& tokenizer_;
  std::vector<std::string> words_;
  size_t pos_ = 0;
};

// The whole history each turn, the OpenAI way, to a server with the prompt
// cache and to one without; usage and timings say what each prefilled.
std::vector<TurnRow> bench_turns(const StartBenchServer& start, const ServeBenchOptions& o, Progress& progress) {
  const std::unique_ptr<BenchServer> cached = start({.parallel = 1, .cache = true});
  const std::unique_ptr<BenchServer> uncached = start({.parallel = 1, .cache = false});
  const Tokenizer tokenizer = Tokenizer::load(o.model);
  TurnText text(tokenizer, o.text);
  ordered_json messages = ordered_json::array();
  std::vector<TurnRow> rows;
  for (int64_t turn = 1; turn <= o.turns; ++turn) {
    progress.show("bench-serve: conversation turn " + std::to_string(turn) + " of " + std::to_string(o.turns), true);
    messages.push_back({{"role", "user"}, {"content", text.next(o.turn_tokens)}});
    const ordered_json body = {{"messages", messages},
                               {"max_tokens", o.reply_tokens},
                               {"temperature", 0},
                               {"ignore_eos", true},
                               {"chat_template_kwargs", {{"enable_thinking", false}}}};
    const ordered_json a = post_json(cached->port(), "/v1/chat/completions", body);
    const ordered_json b = post_json(uncached->port(), "/v1/chat/completions", body);
    auto ttft_ms = [](const ordered_json& r) {
      return r["timings"]["queue_ms"].get<double>() + r["timings"]["prompt_ms"].get<double>();
    };
    auto reply = [](const ordered_json& r) { return r["choices"][0]["message"].value("content", std::string()); };
    TurnRow row;
    row.turn = turn;
    row.prompt_tokens = a["usage"]["prompt_tokens"].get<int64_t>();
    row.cached_tokens = a["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    row.prefilled_tokens = a["timings"]["prompt_n"].get<int64_t>();
    row.ttft_ms = ttft_ms(a);
    row.uncached_prefilled_tokens = b["timings"]["prompt_n"].get<int64_t>();
    row.uncached_ttft_ms = ttft_ms(b);
    row.same_reply = reply(a) == reply(b);
    rows.push_back(row);
    messages.push_back({{"role", "assistant"}, {"content", reply(a)}});
  }
  return rows;
}

// ---- http ---------------------------------------------------------------------------------------

HttpRow bench_http(const StartBenchServer& start, int64_t vocab, const ServeBenchOptions& o, Progress& progress) {
  progress.show("bench-serve: a streamed completion over HTTP", true);
  const std::unique_ptr<BenchServer> server = start({.parallel = 1, .cache = false});
  const std::vector<int64_t> prompt = random_prompt(o.prompt_tokens, vocab, 99);
  const ordered_json body = {{"prompt", prompt}, {"max_tokens", o.http_tokens}, {"temperature", 0},
                             {"ignore_eos", true}, {"stream", true}};
  std::vector<Clock::time_point> arrivals;
  double decode_ms = 0, stream_ms = 0;
  int64_t generated = 0;
  std::string pending;
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(600);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    pending.append(data, n);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos; pending.erase(0, end + 2)) {
      const std::string event = pending.substr(0, end);
      if (event.rfind("data: {", 0) != 0) continue;
      const ordered_json chunk = ordered_json::parse(event.substr(6));
      if (chunk.contains("timings")) {
        decode_ms = chunk["timings"]["predicted_ms"].get<double>();
        stream_ms = chunk["timings"]["stream_ms"].get<double>();
        generated = chunk["timings"]["predicted_n"].get<int64_t>();
      } else if (!chunk["choices"].empty() && !chunk["choices"][0]["text"].get<std::string>().empty()) {
        arrivals.push_back(Clock::now());
      }
    }
    return true;
  };
  const httplib::Result result = client.send(req);
  if (!result || result->status != 200) fail("bench-serve", "the streamed completion failed");

  HttpRow row;
  row.tokens = generated;
  if (arrivals.size() >= 2 && generated >= 2) {
    const double client_ms = std::chrono::duration<double, std::milli>(arrivals.back() - arrivals.front()).count();
    row.client_ms_per_token = client_ms / double(arrivals.size() - 1);
    row.decode_ms_per_token = decode_ms / double(generated - 1);
    row.server_ms_per_token = stream_ms / double(generated - 1);
    row.overhead_pct = (row.client_ms_per_token / row.decode_ms_per_token - 1) * 100;
    row.http_pct = (row.client_ms_per_token / row.server_ms_per_token - 1) * 100;
  }
  return row;
}

}  // namespace

ServeBenchReport run_serve_bench(const ServeBenchOptions& o, const StartBenchServer& start_server) {
  if (!std::filesystem::is_regular_file(o.model / "tokenizer.json"))
    fail(o.model.string(), "bench-serve needs a tokenizer.json in the model folder");
  int64_t vocab = load_genai_config(o.model / "genai_config.json").vocab_size;
  if (vocab <= 0) vocab = Tokenizer::load(o.model).vocab_size();
  Progress progress(o.progress);
  ServeBenchReport report;
  report.model = o.model.string();
  report.threads = o.threads;
  if (!o.streams.empty()) report.streams = bench_streams(start_server, vocab, o, progress);
  if (o.turns > 0) report.turns = bench_turns(start_server, o, progress);
  if (o.http) report.http.push_back(bench_http(start_server, vocab, o, progress));
  progress.done();
  return report;
}

nlohmann::json to_json(const ServeBenchReport& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["threads"] = r.threads;
  j["streams"] = nlohmann::json::array();
  for (const StreamsRow& s : r.streams)
    j["streams"].push_back({{"streams", s.streams}, {"decode_tokens_per_second", s.decode_tokens_per_second},
                            {"step_ms", s.step_ms}, {"speedup", s.speedup}});
  j["turns"] = nlohmann::json::array();
  for (const TurnRow& t : r.turns)
    j["turns"].push_back({{"turn", t.turn}, {"prompt_tokens", t.prompt_tokens}, {"cached_tokens", t.cached_tokens},
                          {"prefilled_tokens", t.prefilled_tokens}, {"ttft_ms", t.ttft_ms},
                          {"uncached_prefilled_tokens", t.uncached_prefilled_tokens},
                          {"uncached_ttft_ms", t.uncached_ttft_ms}, {"same_reply", t.same_reply}});
  j["http"] = nlohmann::json::array();
  for (const HttpRow& h : r.http)
    j["http"].push_back({{"tokens", h.tokens}, {"client_ms_per_token", h.client_ms_per_token},
                         {"server_ms_per_token", h.server_ms_per_token}, {"decode_ms_per_token", h.decode_ms_per_token},
                         {"http_pct", h.http_pct}, {"overhead_pct", h.overhead_pct}});
  return j;
}

std::string to_markdown(const ServeBenchReport& r) {
  std::ostringstream out;
  char line[256];
  if (!r.streams.empty()) {
    out << "| streams | aggregate decode tokens/s | batched step ms | x one stream |\n|---|---|---|---|\n";
    for (const StreamsRow& s : r.streams) {
      std::snprintf(line, sizeof line, "| %lld | %.1f | %.1f | %.2f |\n", (long long)s.streams, s.decode_tokens_per_second,
                    s.step_ms, s.speedup);
      out << line;
    }
    out << "\n";
  }
  if (!r.turns.empty()) {
    out << "| turn | prompt tokens | cached | prefilled | TTFT ms | prefilled, no cache | TTFT ms, no cache | same reply |\n"
           "|---|---|---|---|---|---|---|---|\n";
    for (const TurnRow& t : r.turns) {
      std::snprintf(line, sizeof line, "| %lld | %lld | %lld | %lld | %.0f | %lld | %.0f | %s |\n", (long long)t.turn,
                    (long long)t.prompt_tokens, (long long)t.cached_tokens, (long long)t.prefilled_tokens, t.ttft_ms,
                    (long long)t.uncached_prefilled_tokens, t.uncached_ttft_ms, t.same_reply ? "yes" : "no");
      out << line;
    }
    out << "\n";
  }
  for (const HttpRow& h : r.http) {
    std::snprintf(line, sizeof line,
                  "a streamed completion (%lld tokens): %.3f ms per token at the client, %.3f ms as the scheduler hands "
                  "them over, %.3f ms per decode step: HTTP + JSON + SSE %+.2f %%, all outside the model step %+.2f %%\n",
                  (long long)h.tokens, h.client_ms_per_token, h.server_ms_per_token, h.decode_ms_per_token, h.http_pct,
                  h.overhead_pct);
    out << line;
  }
  return out.str();
}

}  // namespace deltagen::measure
