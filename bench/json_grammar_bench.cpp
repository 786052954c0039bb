// json_grammar_bench: what constrained decoding (runtime/json_grammar.h,
// runtime/token_table.h, Sampler::next with a predicate) costs per decode
// step on a real vocabulary: Qwen3's tokenizer, 151,936 logits per row.
//
// For a few grammar states (the start of a json_object document, inside a
// string, before a key of a closed object, inside a number), with synthetic
// logits: the rest N(0, 2) (their best near 9), the favourite at 20, either
// allowed ("fav ok", the usual step) or not, with R refused tokens between
// 20 and 14 above every allowed one ("fav bad@R": the model wants prose
// where JSON must come). Per row: the time of one constrained choice (greedy, and
// sampled with temperature 0.7 / top-p 0.9 and temperature 1), the grammar
// tests it made, next() unconstrained for reference, the full mask
// (fill_allowed) and one token test (can_accept).
//
//   json_grammar_bench [--tokenizer DIR] [--steps N]
// Run under `flock /tmp/deltagen-bench.lock` on a shared machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/json_grammar.h"
#include "runtime/sampling.h"
#include "runtime/token_table.h"
#include "tokenizer/tokenizer.h"

using namespace deltagen;
using Clock = std::chrono::steady_clock;

namespace {

double micros_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// Median of `runs` timings of fn(), in microseconds.
template <class Fn>
double median_us(int runs, Fn&& fn) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(micros_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct State {
  const char* name;
  JsonGrammar grammar;
};

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_dir = "third_party/tokenizer/qwen3";
  int steps = 31;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokenizer")) tokenizer_dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
  }
  const int64_t vocab = 151936;
  const Tokenizer tokenizer = Tokenizer::load(tokenizer_dir);
  const std::vector<int64_t> ends = {*tokenizer.token_to_id("<|endoftext|>"), *tokenizer.token_to_id("<|im_end|>")};
  auto t0 = Clock::now();
  const TokenTable table = TokenTable::from_tokenizer(tokenizer, vocab, ends);
  std::printf("token table: %.1f ms for %lld ids\n", micros_since(t0) / 1000, (long long)vocab);

  const auto schema = nlohmann::ordered_json::parse(R"({"type":"object","properties":{
    "name":{"type":"string"},"age":{"type":"integer"},"email":{"type":"string","format":"email"},
    "tags":{"type":"array","items":{"enum":["admin","user","guest"]}}},
    "required":["name","age"],"additionalProperties":false})");
  t0 = Clock::now();
  const JsonGrammar person = JsonGrammar::from_schema(schema);
  std::printf("schema compile: %.1f us\n\n", micros_since(t0));
  std::vector<State> states = {{"object start", JsonGrammar::any_object()},
                               {"in a string", person},
                               {"closed key", person},
                               {"in a number", person}};
  states[1].grammar.accept(R"({"name": "Jo)");
  states[2].grammar.accept(R"({"name": "Jo", )");
  states[3].grammar.accept(R"({"name": "Jo", "age": 4)");

  std::printf("%-13s %-11s %7s | %9s %6s | %9s %6s | %9s %6s | %9s | %9s %9s\n", "state", "logits", "allowed",
              "greedy us", "tests", "t.7p.9 us", "tests", "t1 us", "tests", "uncon. us", "mask us", "1 test ns");
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  int64_t sink = 0;  // keeps the results alive
  for (State& s : states) {
    std::vector<uint8_t> mask(static_cast<size_t>(vocab));
    const double mask_us = median_us(5, [&] { table.fill_allowed(s.grammar, mask); });
    std::vector<int64_t> ok, bad;
    for (int64_t id = 0; id < vocab; ++id) (mask[size_t(id)] ? ok : bad).push_back(id);
    // One token test, averaged over a sample of ids.
    std::vector<int64_t> sample;
    for (int i = 0; i < 20000; ++i) sample.push_back(int64_t(rng() % uint32_t(vocab)));
    const double test_ns = median_us(5, [&] {
      for (int64_t id : sample) sink += table.allowed(s.grammar, id);
    }) * 1000 / double(sample.size());

    for (int rank : {0, 30, 300, 3000}) {
      std::vector<float> logits(static_cast<size_t>(vocab));
      for (auto& l : logits) l = normal(rng);
      // The favourite and, when rank > 0, the `rank` next best are refused ones.
      std::shuffle(ok.begin(), ok.end(), rng);
      std::shuffle(bad.begin(), bad.end(), rng);
      if (rank == 0) {
        logits[size_t(ok[0])] = 20;
      } else {
        for (int r = 0; r < rank && r < int(bad.size()); ++r) logits[size_t(bad[size_t(r)])] = 20.0f - 6.0f * float(r) / float(rank);
      }
      auto run = [&](SamplingOptions o, int64_t* tests) {
        Sampler sampler(o, vocab, 7);
        *tests = 0;
        return median_us(steps, [&] {
          sink += sampler.next(logits.data(),
                               [&](int64_t id) {
                                 ++*tests;
                                 return table.allowed(s.grammar, id);
                               },
                               [&](std::span<uint8_t> m) { table.fill_allowed(s.grammar, m); });
        });
      };
      SamplingOptions greedy, nucleus, plain;
      nucleus.temperature = 0.7, nucleus.top_p = 0.9;
      plain.temperature = 1.0;
      int64_t tg, tn, tp;
      const double g_us = run(greedy, &tg), n_us = run(nucleus, &tn), p_us = run(plain, &tp);
      Sampler unconstrained(nucleus, vocab, 7);
      const double u_us = median_us(steps, [&] { sink += unconstrained.next(logits.data()); });
      char label[32];
      std::snprintf(label, sizeof label, rank ? "fav bad@%d" : "fav ok", rank);
      std::printf("%-13s %-11s %7zu | %9.1f %6.1f | %9.1f %6.1f | %9.1f %6.1f | %9.1f | %9.0f %9.0f\n", s.name, label,
                  ok.size(), g_us, double(tg) / steps, n_us, double(tn) / steps, p_us, double(tp) / steps, u_us, mask_us,
                  test_ns);
    }
  }
  return sink == 42 ? 1 : 0;
}
