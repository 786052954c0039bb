// deltagen bench-serve --model DIR [--streams 1,2,4,8] [--prompt 64] [--gen 128] [--runs 2]
//                      [--turns 10] [--turn-tokens 300] [--reply 64] [--text FILE]
//                      [--no-http] [--http-tokens 128] [--threads T] [--kernels K]
//                      [--json | --markdown] [--json-out FILE]
//
// What `deltagen serve` delivers (measure/serve_bench.h, docs/serve.md):
// aggregate decode tokens/s at each number of concurrent streams; a
// conversation's prefilled tokens and time to first token per turn, with
// and without the prompt cache; HTTP + SSE cost per streamed token.
// --streams "" or --turns 0 skip a part.
//
// The bench is an HTTP client (measure/); the servers it measures are
// `deltagen serve`'s own, started here in this process on one loaded model.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "measure/serve_bench.h"
#include "serve/http_server.h"
#include "serve/scheduler.h"
#include "serve/service.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/generation_flags.h"

namespace deltagen {
namespace {

// `deltagen serve` on loopback, any free port: a scheduler with the bench's
// rows and cache setting, the service and the HTTP server on their thread.
class InProcessServer final : public measure::BenchServer {
 public:
  InProcessServer(const std::shared_ptr<Engine>& engine, const std::filesystem::path& model,
                  const measure::BenchServerConfig& config)
      : scheduler_(engine, {.parallel = config.parallel, .cache = config.cache}),
        service_(engine, ChatTemplate::for_model(model), scheduler_, {.model_name = "bench"}),
        http_(service_, {.host = "127.0.0.1", .port = 0}),
        port_(http_.bind()),
        serving_([this] { http_.run(); }) {}
  ~InProcessServer() override {
    http_.stop();
    serving_.join();
  }
  int port() const override { return port_; }

 private:
  serve::Scheduler scheduler_;
  serve::Service service_;
  serve::HttpServer http_;
  int port_;
  std::thread serving_;
};

}  // namespace

int cmd_bench_serve(int argc, char** argv) {
  Args args(argc, argv, {"json", "markdown", "no-http"});
  measure::ServeBenchOptions o;
  o.model = args.require("model");
  const EngineOptions engine_options = parse_engine_flags(args);
  o.threads = engine_options.threads;
  if (auto streams = args.get("streams")) o.streams = streams->empty() ? std::vector<int64_t>() : parse_ids(*streams, "--streams");
  for (int64_t k : o.streams)
    if (k < 1 || k > 256) fail("--streams", "each count must be between 1 and 256");
  o.prompt_tokens = args.get_int("prompt", o.prompt_tokens);
  o.gen_tokens = args.get_int("gen", o.gen_tokens);
  o.runs = args.get_int("runs", o.runs);
  o.turns = args.get_int("turns", o.turns);
  o.turn_tokens = args.get_int("turn-tokens", o.turn_tokens);
  o.reply_tokens = args.get_int("reply", o.reply_tokens);
  o.text = args.get_or("text", "");
  o.http = !args.flag("no-http");
  o.http_tokens = args.get_int("http-tokens", o.http_tokens);
  const bool as_json = args.flag("json"), as_markdown = args.flag("markdown");
  const auto json_out = args.get("json-out");
  args.finish();
  if (o.prompt_tokens < 1 || o.gen_tokens < 2 || o.turn_tokens < 1 || o.reply_tokens < 1 || o.http_tokens < 2 ||
      o.turns < 0 || o.runs < 1)
    fail("bench-serve", "token counts must be positive (--gen and --http-tokens at least 2)");
  o.progress = ::isatty(STDERR_FILENO) != 0;

  const std::shared_ptr<Engine> engine = Engine::load(o.model, engine_options);
  const measure::ServeBenchReport report =
      measure::run_serve_bench(o, [&](const measure::BenchServerConfig& config) -> std::unique_ptr<measure::BenchServer> {
        return std::make_unique<InProcessServer>(engine, o.model, config);
      });
  if (json_out) {
    std::ofstream out(*json_out);
    out << measure::to_json(report).dump(2) << "\n";
    if (!out) fail(*json_out, "cannot write the file");
  }
  const std::string text = as_json ? measure::to_json(report).dump(2) + "\n" : measure::to_markdown(report);
  (void)as_markdown;
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace deltagen
