#include "measure/serve_bench.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <httplib.h>

#include "chat/output_parser.h"
#include "measure/progress.h"
#include "serve/http_server.h"
#include "tokenizer/tokenizer.h"

namespace deltagen::measure {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

serve::SequenceEnd wait_end(serve::SequenceStream& stream) {
  std::vector<serve::TokenEvent> ignored;
  for (;;) {
    if (auto end = stream.wait(ignored, std::chrono::milliseconds(100))) return std::move(*end);
    ignored.clear();
  }
}

std::vector<int64_t> random_prompt(int64_t length, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(length));
  for (int64_t& id : ids) id = int64_t(rng() % uint32_t(std::min<int64_t>(vocab, 100000)));
  return ids;
}

// ---- streams -----------------------------------------------------------------------------

std::vector<StreamsRow> bench_streams(const std::shared_ptr<Engine>& engine, const ServeBenchOptions& o,
                                      Progress& progress) {
  std::vector<StreamsRow> rows;
  for (int64_t k : o.streams) {
    StreamsRow row;
    row.streams = k;
    serve::Scheduler scheduler(engine, {.parallel = k, .prefill_chunk = 512, .cache = false});
    for (int64_t run = 0; run < std::max<int64_t>(1, o.runs); ++run) {
      progress.show("bench-serve: " + std::to_string(k) + " streams, run " + std::to_string(run + 1), true);
      const serve::SchedulerStats before = scheduler.stats();
      std::vector<std::shared_ptr<serve::SequenceStream>> streams;
      for (int64_t i = 0; i < k; ++i) {
        serve::SequenceRequest r;
        r.prompt = random_prompt(o.prompt_tokens, engine->vocab_size(), uint32_t(run * 100 + i));
        r.options.max_new_tokens = o.gen_tokens;
        r.options.stop_at_eos = false;
        streams.push_back(scheduler.submit(std::move(r)));
      }
      for (auto& s : streams) wait_end(*s);
      // Only the steps that ran all k sequences: the steady state, not the
      // ramp while the prompts are still being prefilled.
      const serve::SchedulerStats after = scheduler.stats();
      const int64_t steps = after.steps_by_rows[size_t(k)] - before.steps_by_rows[size_t(k)];
      const double seconds = after.seconds_by_rows[size_t(k)] - before.seconds_by_rows[size_t(k)];
      if (steps > 0 && seconds > 0 && double(k * steps) / seconds > row.decode_tokens_per_second) {
        row.decode_tokens_per_second = double(k * steps) / seconds;
        row.step_ms = seconds / double(steps) * 1000;
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

std::vector<TurnRow> bench_turns(const std::shared_ptr<Engine>& engine, const ServeBenchOptions& o, Progress& progress) {
  serve::Scheduler cached(engine, {.parallel = 1}), uncached(engine, {.parallel = 1, .cache = false});
  const ChatTemplate chat_template = ChatTemplate::for_model(o.model);
  serve::Service with_cache(engine, chat_template, cached, {"bench"});
  serve::Service without_cache(engine, chat_template, uncached, {"bench"});
  TurnText text(engine->tokenizer(), o.text);
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
    auto run = [&](const serve::Service& service) {
      serve::PreparedChat p = service.prepare_chat(body.dump());
      return wait_end(*service.scheduler().submit(std::move(p.sequence)));
    };
    const serve::SequenceEnd a = run(with_cache), b = run(without_cache);
    TurnRow row;
    row.turn = turn;
    row.prompt_tokens = a.prompt_tokens;
    row.cached_tokens = a.cached_tokens;
    row.prefilled_tokens = a.prefilled_tokens;
    row.ttft_ms = (a.queue_seconds + a.prefill_seconds) * 1000;
    row.uncached_prefilled_tokens = b.prefilled_tokens;
    row.uncached_ttft_ms = (b.queue_seconds + b.prefill_seconds) * 1000;
    row.same_reply = a.generated_ids == b.generated_ids;
    rows.push_back(row);
    messages.push_back({{"role", "assistant"}, {"content", parse_chat_output(a.text, {}).content}});
  }
  return rows;
}

// ---- http ---------------------------------------------------------------------------------------

HttpRow bench_http(const std::shared_ptr<Engine>& engine, const ServeBenchOptions& o, Progress& progress) {
  progress.show("bench-serve: a streamed completion over HTTP", true);
  serve::Scheduler scheduler(engine, {.parallel = 1, .cache = false});
  serve::Service service(engine, ChatTemplate::for_model(o.model), scheduler, {"bench"});
  serve::HttpServer server(service, {.port = 0, .threads = 4});
  const int port = server.bind();
  std::thread serving([&] { server.run(); });

  const std::vector<int64_t> prompt = random_prompt(o.prompt_tokens, engine->vocab_size(), 99);
  const ordered_json body = {{"prompt", prompt}, {"max_tokens", o.http_tokens}, {"temperature", 0},
                             {"ignore_eos", true}, {"stream", true}};
  std::vector<Clock::time_point> arrivals;
  double decode_ms = 0, stream_ms = 0;
  int64_t generated = 0;
  std::string pending;
  httplib::Client client("127.0.0.1", port);
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
  server.stop();
  serving.join();
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

ServeBenchReport run_serve_bench(const ServeBenchOptions& o) {
  Progress progress(o.progress);
  std::shared_ptr<Engine> engine = Engine::load(o.model, o.engine);
  if (!engine->has_tokenizer()) fail(o.model.string(), "bench-serve needs a tokenizer.json in the model folder");
  ServeBenchReport report;
  report.model = o.model.string();
  report.threads = o.engine.threads;
  if (!o.streams.empty()) report.streams = bench_streams(engine, o, progress);
  if (o.turns > 0) report.turns = bench_turns(engine, o, progress);
  if (o.http) report.http.push_back(bench_http(engine, o, progress));
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
