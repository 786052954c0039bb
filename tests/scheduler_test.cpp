// Continuous batching (serve/scheduler.h) on the golden model: concurrent
// sequences that join and leave give exactly what each gives alone, the
// prompt cache restores a shared prefix and changes nothing in the output,
// cancellation, logprobs, stop strings, and requests that can never run.
#include "serve/scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime_fixtures.h"
#include "test_util.h"

namespace deltagen::serve {
namespace {

using Ids = std::vector<int64_t>;
using test::golden_chat_engine;

// Everything a stream produced, once it has ended.
struct Collected {
  std::vector<TokenEvent> tokens;
  SequenceEnd end;
};

Collected collect(SequenceStream& stream) {
  Collected c;
  for (;;) {
    if (auto end = stream.wait(c.tokens, std::chrono::milliseconds(50))) {
      c.end = std::move(*end);
      return c;
    }
  }
}

Ids prompt_of(int64_t length, uint32_t seed) {
  std::mt19937 rng(seed);
  Ids ids;
  for (int64_t i = 0; i < length; ++i) ids.push_back(int64_t(rng() % 500));
  return ids;
}

GenerationOptions options(int64_t new_tokens, double temperature = 0, uint64_t seed = 0) {
  GenerationOptions o;
  o.max_new_tokens = new_tokens;
  o.stop_at_eos = false;
  o.sampling.temperature = temperature;
  o.sampling.seed = seed;
  return o;
}

// What one sequence generates alone, through the library's Conversation.
GenerationResult alone(const Ids& prompt, const GenerationOptions& o) {
  Conversation c(golden_chat_engine());
  return c.generate(std::span<const int64_t>(prompt), o);
}

TEST(Scheduler, ConcurrentSequencesEqualEachRunAlone) {
  Scheduler scheduler(golden_chat_engine(), SchedulerOptions{.parallel = 3, .prefill_chunk = 7});
  // Different prompt lengths and reply lengths: sequences join and leave at
  // different steps, and more requests than rows wait in the queue.
  struct Case {
    Ids prompt;
    GenerationOptions o;
  };
  std::vector<Case> cases;
  for (int i = 0; i < 7; ++i)
    cases.push_back({prompt_of(5 + 9 * i, uint32_t(i)), options(4 + 5 * (i % 3), i % 2 ? 0.8 : 0.0, uint64_t(i))});
  std::vector<std::shared_ptr<SequenceStream>> streams;
  for (const Case& c : cases) streams.push_back(scheduler.submit({c.prompt, {}, c.o}));
  for (size_t i = 0; i < cases.size(); ++i) {
    const Collected got = collect(*streams[i]);
    const GenerationResult want = alone(cases[i].prompt, cases[i].o);
    EXPECT_EQ(got.end.generated_ids, want.generated_ids) << "sequence " << i;
    EXPECT_EQ(got.end.error, "");
    EXPECT_EQ(got.end.stop_reason, StopReason::MaxNewTokens);
    ASSERT_EQ(got.tokens.size(), want.generated_ids.size());
    for (size_t t = 0; t < got.tokens.size(); ++t) EXPECT_EQ(got.tokens[t].token, want.generated_ids[t]);
    std::string text;
    for (const TokenEvent& e : got.tokens) text += e.text;
    EXPECT_EQ(text, want.text);
    EXPECT_EQ(got.end.text, want.text);
  }
  const SchedulerStats s = scheduler.stats();
  EXPECT_EQ(s.finished, 7);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.queued, 0);
  EXPECT_GT(s.decode_rows, s.decode_steps);  // some steps ran several sequences at once
}

TEST(Scheduler, APromptCacheHitRunsOnlyTheRestAndChangesNothing) {
  const Ids first = prompt_of(40, 1);
  Ids second = first;
  const Ids more = prompt_of(13, 2);
  second.insert(second.end(), more.begin(), more.end());

  Scheduler scheduler(golden_chat_engine(), SchedulerOptions{.parallel = 2, .prefill_chunk = 16});
  // The first request marks its end as a checkpoint (as the server marks the
  // end of the last user message).
  const Collected a = collect(*scheduler.submit({first, {int64_t(first.size())}, options(5)}));
  EXPECT_EQ(a.end.cached_tokens, 0);
  EXPECT_EQ(a.end.prefilled_tokens, 40);
  const Collected b = collect(*scheduler.submit({second, {}, options(6)}));
  EXPECT_EQ(b.end.cached_tokens, 40);
  EXPECT_EQ(b.end.prefilled_tokens, 13);
  EXPECT_EQ(b.end.generated_ids, alone(second, options(6)).generated_ids);
  // The same prompt again restores the same 40: only checkpoints are cached.
  const Collected c = collect(*scheduler.submit({second, {}, options(6)}));
  EXPECT_EQ(c.end.cached_tokens, 40);
  EXPECT_EQ(c.end.generated_ids, b.end.generated_ids);

  Scheduler uncached(golden_chat_engine(), SchedulerOptions{.parallel = 2, .prefill_chunk = 16, .cache = false});
  collect(*uncached.submit({first, {int64_t(first.size())}, options(5)}));
  const Collected d = collect(*uncached.submit({second, {}, options(6)}));
  EXPECT_EQ(d.end.cached_tokens, 0);
  EXPECT_EQ(d.end.generated_ids, b.end.generated_ids);
  EXPECT_EQ(scheduler.stats().cache.hits, 2);
}

TEST(Scheduler, ASavedStateWarmsTheCache) {
  // A prompt's state alone (generate --max-new-tokens 0 --save-state), then
  // serve --load-state: requests that start with it run only the rest.
  const Ids system = prompt_of(30, 13);
  Conversation saved(golden_chat_engine());
  GenerationOptions prefill_only = options(0);
  saved.generate(std::span<const int64_t>(system), prefill_only);
  test::TempDir dir;
  saved.snapshot().save(dir / "system.state");

  Scheduler scheduler(golden_chat_engine(), SchedulerOptions{.parallel = 1});
  scheduler.warm_cache(Snapshot::load(dir / "system.state"));
  Ids prompt = system;
  for (int64_t id : prompt_of(9, 14)) prompt.push_back(id);
  const Collected c = collect(*scheduler.submit({prompt, {}, options(4)}));
  EXPECT_EQ(c.end.cached_tokens, 30);
  EXPECT_EQ(c.end.generated_ids, alone(prompt, options(4)).generated_ids);
}

TEST(Scheduler, LongPromptsAreCheckpointedEveryKTokens) {
  Scheduler scheduler(golden_chat_engine(), SchedulerOptions{.parallel = 1, .prefill_chunk = 64, .checkpoint_every = 16});
  const Ids p = prompt_of(50, 3);
  collect(*scheduler.submit({p, {}, options(2)}));
  EXPECT_EQ(scheduler.stats().cache.entries, 3);  // at 16, 32, 48
  Ids q(p.begin(), p.begin() + 40);
  q.push_back(7);
  const Collected r = collect(*scheduler.submit({q, {}, options(3)}));
  EXPECT_EQ(r.end.cached_tokens, 32);
  EXPECT_EQ(r.end.generated_ids, alone(q, options(3)).generated_ids);
}

TEST(Scheduler, ACancelledSequenceEndsAndTheOthersGoOn) {
  Scheduler scheduler(golden_chat_engine(), SchedulerOptions{.parallel = 2});
  const Ids p1 = prompt_of(10, 4), p2 = prompt_of(12, 5);
  auto s1 = scheduler.submit({p1, {}, options(3000)});
  auto s2 = scheduler.submit({p2, {}, options(40)});
  std::vector<TokenEvent> seen;
  while (seen.size() < 5) s1->wait(seen, std::chrono::milliseconds(50));
  s1->cancel();
  const Collected c1 = collect(*s1);
  EXPECT_EQ(c1.end.stop_reason, StopReason::Cancelled);
  EXPECT_LT(c1.end.generated_ids.size(), 3000u);
  const Collected c2 = collect(*s2);
  EXPECT_EQ(c2.end.generated_ids, alone(p2, options(40)).generated_ids);
  EXPECT_EQ(scheduler.stats().cancelled, 1);
}

TEST(Scheduler, LogprobsAreTheModelsLogSoftmax) {
  const Ids p = prompt_of(9, 6);
  GenerationOptions o = options(3);
  o.collect_logits = true;
  const GenerationResult want = alone(p, o);
  Scheduler scheduler(golden_chat_engine(), SchedulerOptions{.parallel = 1});
  SequenceRequest request{p, {}, options(3)};
  request.top_logprobs = 4;
  const Collected got = collect(*scheduler.submit(request));
  ASSERT_EQ(got.tokens.size(), 3u);
  for (size_t t = 0; t < 3; ++t) {
    const float* row = want.logits.data() + (want.prefilled_tokens - 1 + int64_t(t)) * want.vocab;
    double sum = 0;
    for (int64_t i = 0; i < want.vocab; ++i) sum += std::exp(double(row[i]));
    const TokenLogprobs& lp = *got.tokens[t].logprobs;
    EXPECT_EQ(lp.chosen.id, want.generated_ids[t]);
    EXPECT_NEAR(lp.chosen.logprob, double(row[lp.chosen.id]) - std::log(sum), 1e-4);
    ASSERT_EQ(lp.top.size(), 4u);
    EXPECT_EQ(lp.top[0].id, lp.chosen.id);  // greedy: the chosen one is the best
    for (size_t k = 1; k < 4; ++k) EXPECT_LE(lp.top[k].logprob, lp.top[k - 1].logprob);
  }
}

TEST(Scheduler, StopStringsAndEosEndTheSequence) {
  Scheduler scheduler(golden_chat_engine(), SchedulerOptions{.parallel = 2});
  // The golden continuation decodes to "Mw490w490w381w381..." (tests/chat_test.cpp).
  GenerationOptions o = options(16);
  o.stop_strings = {"0w3"};
  const Collected c = collect(*scheduler.submit({test::golden_prompt_ids(), {}, o}));
  EXPECT_EQ(c.end.stop_reason, StopReason::StopString);
  EXPECT_EQ(c.end.text, "Mw490w49");
  o.stop_strings.clear();
  o.extra_stop_ids = {490};
  const Collected e = collect(*scheduler.submit({test::golden_prompt_ids(), {}, o}));
  EXPECT_EQ(e.end.stop_reason, StopReason::Eos);
  EXPECT_EQ(e.end.generated_ids, (Ids{77, 490}));
}

TEST(Scheduler, AGrammarMakesTheReplyJsonOfTheSchema) {
  Scheduler scheduler(golden_chat_engine(), SchedulerOptions{.parallel = 2});
  const auto schema = nlohmann::ordered_json::parse(
      R"({"type": "object", "properties": {"ok": {"enum": [true, false]}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["ok", "n"], "additionalProperties": false})");
  for (double temperature : {0.0, 1.0}) {
    SequenceRequest r{prompt_of(12, 11), {}, options(400, temperature, 5)};
    r.options.stop_at_eos = true;  // the end may come only once the document is complete
    r.grammar = std::make_shared<const JsonGrammar>(JsonGrammar::from_schema(schema));
    const Collected c = collect(*scheduler.submit(r));
    ASSERT_EQ(c.end.stop_reason, StopReason::Eos) << c.end.text;
    const auto doc = nlohmann::json::parse(c.end.text);
    EXPECT_TRUE(doc.at("ok").is_boolean()) << c.end.text;
    EXPECT_TRUE(doc.at("n").is_number_integer() && doc["n"] >= 0 && doc["n"] <= 9) << c.end.text;
    EXPECT_EQ(doc.size(), 2u);
  }
  // Free text until the grammar's start token, JSON after it: the golden
  // continuation is "M", "w490", ...; with the constraint after 490, the
  // first two tokens are the model's own and the rest is the schema's JSON.
  // (A schema that bounds every string: a random model never ends a free one.)
  SequenceRequest r{test::golden_prompt_ids(), {}, options(400)};
  r.options.stop_at_eos = true;
  r.grammar = std::make_shared<const JsonGrammar>(JsonGrammar::from_schema(schema));
  r.grammar_after = 490;
  const Collected c = collect(*scheduler.submit(r));
  ASSERT_EQ(c.end.stop_reason, StopReason::Eos) << c.end.text;
  ASSERT_EQ(c.end.text.rfind("Mw490", 0), 0u) << c.end.text;
  EXPECT_EQ(nlohmann::json::parse(c.end.text.substr(5)).size(), 2u) << c.end.text;
}

TEST(Scheduler, RefusesRequestsThatCanNeverRun) {
  Scheduler scheduler(golden_chat_engine(), SchedulerOptions{.parallel = 1, .max_length = 64});
  EXPECT_THROW(scheduler.submit({{}, {}, options(1)}), Error);
  EXPECT_THROW(scheduler.submit({{1, 2, 512}, {}, options(1)}), Error);
  EXPECT_THROW(scheduler.submit({prompt_of(65, 7), {}, options(1)}), Error);
  EXPECT_THROW(scheduler.submit({{1, 2}, {}, options(0)}), Error);
  EXPECT_THROW(scheduler.submit({{1, 2}, {5}, options(1)}), Error);  // a checkpoint past the prompt
  SequenceRequest r{{1, 2}, {}, options(1)};
  r.top_logprobs = 21;
  EXPECT_THROW(scheduler.submit(r), Error);
  // A prompt that fits, with a reply that does not: it ends at the length limit.
  const Collected c = collect(*scheduler.submit({prompt_of(60, 8), {}, options(100)}));
  EXPECT_EQ(c.end.stop_reason, StopReason::Length);
  EXPECT_EQ(c.end.generated_ids.size(), 5u);
}

// serve --speculative ngram: every sequence guesses on its own (a run of its
// own per round, while the others step together, parked or not), and each
// gets what it gets alone: greedy and sampled, replies that end inside a
// round (max_tokens), rows that move as others leave, and the length limit.
TEST(Scheduler, SpeculatingSequencesEqualEachRunAlone) {
  SchedulerOptions so{.parallel = 3, .max_length = 96, .prefill_chunk = 7};
  so.speculative.method = SpeculativeMethod::Ngram;
  so.speculative.draft_tokens = 4;
  Scheduler scheduler(golden_chat_engine(), so);
  so.speculative.method = SpeculativeMethod::None;
  Scheduler plain(golden_chat_engine(), so);  // the same limits, no guesses (it equals alone(): above)
  std::vector<std::pair<Ids, GenerationOptions>> cases;
  for (int i = 0; i < 6; ++i) {
    Ids pattern = prompt_of(3 + i % 3, uint32_t(40 + i)), prompt;
    for (int r = 0; r < 4; ++r) prompt.insert(prompt.end(), pattern.begin(), pattern.end());
    cases.push_back({prompt, options(5 + 7 * (i % 3), i % 2 ? 0.8 : 0.0, uint64_t(i))});
  }
  cases.push_back({prompt_of(80, 50), options(100)});  // ends at the length limit (96)
  std::vector<std::shared_ptr<SequenceStream>> streams, plain_streams;
  for (const auto& [prompt, o] : cases) {
    streams.push_back(scheduler.submit({prompt, {}, o}));
    plain_streams.push_back(plain.submit({prompt, {}, o}));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const Collected got = collect(*streams[i]), want = collect(*plain_streams[i]);
    EXPECT_EQ(got.end.generated_ids, want.end.generated_ids) << "sequence " << i;
    EXPECT_EQ(got.end.stop_reason, want.end.stop_reason) << "sequence " << i;
    EXPECT_EQ(got.end.error, "");
    EXPECT_EQ(got.end.text, want.end.text);
    ASSERT_EQ(got.tokens.size(), want.tokens.size());
    if (i + 1 == cases.size()) EXPECT_EQ(got.end.stop_reason, StopReason::Length);
  }
  const SchedulerStats s = scheduler.stats();
  EXPECT_EQ(s.finished, int64_t(cases.size()));
  EXPECT_GT(s.verify_runs, 0);
  EXPECT_GT(s.accepted_tokens, 0) << "no guess was kept: the accept path went untested";
  EXPECT_GT(s.replay_runs, 0) << "no guess was missed: the rollback went untested";
  EXPECT_LE(s.accepted_tokens, s.drafted_tokens);
  std::printf("[ measured ] %lld verify runs, %lld of %lld guesses kept, %lld replays, %lld batched steps\n",
              (long long)s.verify_runs, (long long)s.accepted_tokens, (long long)s.drafted_tokens,
              (long long)s.replay_runs, (long long)s.decode_steps);
}

TEST(Scheduler, StopCancelsEverythingAndRefusesMore) {
  auto scheduler = std::make_unique<Scheduler>(golden_chat_engine(), SchedulerOptions{.parallel = 1});
  auto running = scheduler->submit({prompt_of(8, 9), {}, options(100000)});
  auto queued = scheduler->submit({prompt_of(8, 10), {}, options(10)});
  std::vector<TokenEvent> seen;
  while (seen.empty()) running->wait(seen, std::chrono::milliseconds(50));
  scheduler->stop();
  EXPECT_EQ(collect(*running).end.stop_reason, StopReason::Cancelled);
  EXPECT_EQ(collect(*queued).end.stop_reason, StopReason::Cancelled);
  EXPECT_THROW(scheduler->submit({{1}, {}, options(1)}), Busy);
  scheduler.reset();  // the destructor after stop() is fine
}

}  // namespace
}  // namespace deltagen::serve
