// One loaded model, several generators on different threads
// (docs/reliability.md): the ONNX Runtime session is shared, each generator
// owns its state, and every thread must produce exactly what the same
// request produces alone - the same tokens and bit-identical logits. Run
// under the sanitizer build this also checks the sharing for data races on
// our side (ASan sees use-after-free / overflow from a torn state).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "deltagen/deltagen.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "runtime_fixtures.h"

namespace deltagen {
namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 3;  // each thread runs its request this many times

// Thread t's prompt: different lengths and ids, so the threads' states differ.
std::vector<int64_t> prompt_of(int t) {
  std::vector<int64_t> p = test::golden_prompt_ids();
  p.resize(size_t(3 + 3 * t));
  for (size_t i = 0; i < p.size(); ++i) p[i] = (p[i] + 37 * t + int64_t(i)) % test::kGoldenVocab;
  return p;
}

GenerateResult run_alone(Model& model, const std::vector<int64_t>& prompt) {
  Generator generator(model);
  GenerateOptions o;
  o.max_new_tokens = 48;
  o.collect_logits = true;
  o.prefill_chunk = 4;  // several prefill runs too, not only decode steps
  return generate_greedy(generator, prompt, o);
}

TEST(Threads, GeneratorsSharingOneModelMatchTheirSoloRuns) {
  Model& model = test::golden_runtime_model();
  std::vector<GenerateResult> solo;
  for (int t = 0; t < kThreads; ++t) solo.push_back(run_alone(model, prompt_of(t)));

  std::atomic<int> mismatches{0}, errors{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go) std::this_thread::yield();  // start together, to overlap the runs
      try {
        for (int round = 0; round < kRounds; ++round) {
          GenerateResult r = run_alone(model, prompt_of(t));
          if (r.generated_ids != solo[size_t(t)].generated_ids || r.logits != solo[size_t(t)].logits) ++mismatches;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
        ++errors;
      }
    });
  }
  go = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(mismatches, 0) << "a generator's output changed when other generators ran beside it";
}

// The public API the same way: one Engine (shared session, lazily loaded
// tokenizer), one Conversation per thread, text in and text out.
TEST(Threads, ConversationsSharingOneEngineMatchTheirSoloRuns) {
  // A fresh engine, so that the threads race on its first tokenizer load.
  auto engine = Engine::load(test::golden_chat_model_dir(), EngineOptions{.threads = 1});
  GenerationOptions o;
  o.max_new_tokens = 40;
  o.stop_at_eos = false;
  auto request = [&](int t) {
    Conversation c(engine);
    std::vector<int64_t> ids;
    for (int turn = 0; turn < 2; ++turn) {
      GenerationResult r = c.generate("hello " + std::to_string(t) + " turn " + std::to_string(turn), o);
      ids.insert(ids.end(), r.generated_ids.begin(), r.generated_ids.end());
    }
    return ids;
  };
  std::vector<std::vector<int64_t>> concurrent(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        concurrent[size_t(t)] = request(t);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(concurrent[size_t(t)], request(t)) << "thread " << t;
}

}  // namespace
}  // namespace deltagen
