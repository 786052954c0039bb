// Conversation state snapshots: in memory and in files, restored in this
// process and in a new one (the CLI run twice), rewinding, and every way a
// snapshot file can be wrong.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deltagen/deltagen.h"
#include "runtime/engine_impl.h"
#include "runtime/generator.h"
#include "runtime/snapshot.h"
#include "runtime_fixtures.h"
#include "test_util.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::shared_ptr<Engine> golden_engine() {
  static std::shared_ptr<Engine> engine = Engine::load(test::golden_model_dir(), EngineOptions{.threads = 1});
  return engine;
}

// Sampling, so that equal continuations mean equal state and equal random streams.
GenerationOptions sampled(int64_t new_tokens, uint64_t seed = 3) {
  GenerationOptions o;
  o.max_new_tokens = new_tokens;
  o.stop_at_eos = false;
  o.collect_logits = true;
  o.sampling.temperature = 0.9;
  o.sampling.top_p = 0.95;
  o.sampling.seed = seed;
  return o;
}

const std::vector<int64_t> kNoPrompt;

using test::expect_error;

TEST(Snapshot, RestoringContinuesExactlyAsTheFirstTime) {
  Conversation c(golden_engine());
  const GenerationResult first = c.generate(test::golden_prompt_ids(), sampled(20));
  ASSERT_EQ(first.generated_ids.size(), 20u);
  const Snapshot snapshot = c.snapshot();
  EXPECT_EQ(snapshot.tokens(), c.tokens());
  EXPECT_EQ(c.length(), 12 + 20);

  const GenerationResult a = c.generate(kNoPrompt, sampled(20, 4));
  c.restore(snapshot);
  EXPECT_EQ(c.tokens(), snapshot.tokens());
  const GenerationResult b = c.generate(kNoPrompt, sampled(20, 4));
  EXPECT_EQ(a.generated_ids, b.generated_ids);
  EXPECT_TRUE(a.logits == b.logits) << "the restored state must give bit-identical logits";
  EXPECT_EQ(b.prefilled_tokens, 1);  // the pending last token of the first request
}

TEST(Snapshot, RewindingToAnEarlierSnapshotGivesWhatAFreshRunGives) {
  const auto prompt = test::golden_prompt_ids();
  const std::vector<int64_t> second_prompt = {300, 42, 7};
  Conversation c(golden_engine());
  c.generate(prompt, sampled(6));
  const Snapshot early = c.snapshot();
  c.generate(second_prompt, sampled(9, 8));
  c.generate(kNoPrompt, sampled(5, 9));
  c.restore(early);
  const GenerationResult rewound = c.generate(second_prompt, sampled(9, 8));

  Conversation fresh(golden_engine());
  fresh.generate(prompt, sampled(6));
  const GenerationResult again = fresh.generate(second_prompt, sampled(9, 8));
  EXPECT_EQ(rewound.generated_ids, again.generated_ids);
  EXPECT_TRUE(rewound.logits == again.logits);

  // One run over the whole history (a different chunking: equal up to fp32 noise).
  Conversation one_shot(golden_engine());
  std::vector<int64_t> history = early.tokens();
  history.insert(history.end(), second_prompt.begin(), second_prompt.end());
  GenerationOptions greedy;
  greedy.max_new_tokens = 9;
  greedy.stop_at_eos = false;
  Conversation stepwise(golden_engine());
  stepwise.restore(early);
  EXPECT_EQ(one_shot.generate(history, greedy).generated_ids, stepwise.generate(second_prompt, greedy).generated_ids);
}

TEST(Snapshot, FileRoundTripInAnotherConversation) {
  TempDir tmp;
  const fs::path file = tmp / "state.bin";
  Conversation c(golden_engine());
  c.generate(test::golden_prompt_ids(), sampled(10));
  c.snapshot().save(file);
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1) << "temp file left";
  const GenerationResult a = c.generate(std::vector<int64_t>{99, 123}, sampled(10, 5));

  Conversation other(golden_engine(), 40);
  other.restore(Snapshot::load(file));
  const GenerationResult b = other.generate(std::vector<int64_t>{99, 123}, sampled(10, 5));
  EXPECT_EQ(a.generated_ids, b.generated_ids);
  EXPECT_TRUE(a.logits == b.logits);

  // The bytes say the same when parsed and written again.
  const std::string bytes = test::read_text(file);
  const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
  const auto reparsed = serialize_snapshot(parse_snapshot(std::span(data, bytes.size()), "state.bin"));
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(reparsed.data()), reparsed.size()), bytes);
}

// ---- bad snapshot files -------------------------------------------------------------

std::string golden_snapshot_bytes() {
  Conversation c(golden_engine());
  c.generate(std::vector<int64_t>{5, 17, 300}, sampled(3));
  const auto bytes = serialize_snapshot(detail::Access::state(c.snapshot()));
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void expect_load_error(const std::string& bytes, const std::string& phrase) {
  TempDir tmp;
  const fs::path file = tmp / "bad.state";
  std::ofstream(file, std::ios::binary) << bytes;
  expect_error(
      [&] {
        Conversation c(golden_engine());
        c.restore(Snapshot::load(file));
      },
      phrase);
  try {
    Snapshot::load(file);
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(file.string() + ": ", 0), 0u) << "the error names the file: " << e.what();
  }
}

TEST(SnapshotFile, TruncatedAnywhereIsAClearError) {
  const std::string good = golden_snapshot_bytes();
  for (size_t keep : {size_t(0), size_t(5), size_t(20), size_t(60), good.size() / 2, good.size() - 9, good.size() - 1})
    expect_load_error(good.substr(0, keep), keep < 8 ? "bad magic" : "truncated snapshot");
}

TEST(SnapshotFile, BadMagicVersionChecksumAndTrailingBytesAreClearErrors) {
  const std::string good = golden_snapshot_bytes();
  std::string magic = good;
  magic[0] = 'X';
  expect_load_error(magic, "not a deltagen state snapshot");
  expect_load_error("hello world, this is not a snapshot at all", "not a deltagen state snapshot");

  std::string version = good;
  version[8] = 9;
  expect_load_error(version, "format version 9 is not supported");

  std::string flipped = good;
  flipped[good.size() - 100] ^= 0x10;  // inside the state data
  expect_load_error(flipped, "checksum mismatch");

  expect_load_error(good + "extra", "unexpected bytes after its end");
}

TEST(SnapshotFile, SnapshotOfAnotherModelIsAClearError) {
  const std::string good = golden_snapshot_bytes();
  const auto* data = reinterpret_cast<const std::byte*>(good.data());
  auto reserialize = [](const StateSnapshot& s) {
    const auto bytes = serialize_snapshot(s);
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  };

  // A conv state of another width: a consistent, checksummed file of other dims.
  StateSnapshot other_dims = parse_snapshot(std::span(data, good.size()), "good");
  for (CacheSnapshot& c : other_dims.caches)
    if (c.kind == CacheKind::ConvState) {
      c.dims[1] /= 2;
      c.data.resize(c.data.size() / 2);
    }
  expect_load_error(reserialize(other_dims), "does not match this model: layer 0 conv_state [1,64,3]");

  StateSnapshot other_vocab = parse_snapshot(std::span(data, good.size()), "good");
  other_vocab.vocab_size = 1000;
  expect_load_error(reserialize(other_vocab), "vocabulary 1000");

  StateSnapshot fewer_layers = parse_snapshot(std::span(data, good.size()), "good");
  fewer_layers.caches.pop_back();
  expect_load_error(reserialize(fewer_layers), "state tensors");

  StateSnapshot bad_token = parse_snapshot(std::span(data, good.size()), "good");
  bad_token.tokens[1] = 512;
  expect_load_error(reserialize(bad_token), "outside the vocabulary");
}

TEST(SnapshotFile, ASnapshotLongerThanTheStateIsAClearErrorAndChangesNothing) {
  Conversation long_one(golden_engine());
  long_one.generate(test::golden_prompt_ids(), sampled(10));
  Conversation short_one(golden_engine(), 16);
  short_one.generate(std::vector<int64_t>{5, 17}, sampled(2));
  const std::vector<int64_t> before = short_one.tokens();
  expect_error([&] { short_one.restore(long_one.snapshot()); }, "more than the maximum length 16");
  EXPECT_EQ(short_one.tokens(), before);
  expect_error([] { Snapshot().tokens(); }, "empty");
}

// ---- the CLI: save in one process, continue in another ------------------------------

std::string ids_flag(const std::vector<int64_t>& ids) { return test::joined_ids(ids, ','); }

TEST(SnapshotCli, SavedStateContinuesIdenticallyInANewProcess) {
  TempDir tmp;
  const fs::path state = tmp / "conversation.state";
  const std::string model = test::golden_model_dir().string();
  const std::vector<std::string> sampling = {"--temperature", "0.9", "--top-p", "0.95", "--ignore-eos", "--json"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), sampling.begin(), sampling.end());
    return args;
  };

  auto first = test::run_cli(with({"generate", "--model", model, "--ids", ids_flag(test::golden_prompt_ids()),
                                   "--max-new-tokens", "20", "--seed", "1", "--save-state", state.string()}));
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_TRUE(fs::exists(state));
  auto second = test::run_cli(with({"generate", "--model", model, "--load-state", state.string(), "--ids", "99,123",
                                    "--max-new-tokens", "20", "--seed", "2"}));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto third = test::run_cli(with({"generate", "--model", model, "--load-state", state.string(), "--max-new-tokens",
                                   "20", "--seed", "3"}));  // no prompt: just continue
  ASSERT_EQ(third.exit_code, 0) << third.err;

  // The same requests in one process, through the library.
  Conversation c(golden_engine());
  GenerationOptions o = sampled(20, 1);
  o.collect_logits = false;
  o.prefill_chunk = 512;
  const GenerationResult lib_first = c.generate(test::golden_prompt_ids(), o);
  const Snapshot saved = c.snapshot();
  o.sampling.seed = 2;
  const GenerationResult lib_second = c.generate(std::vector<int64_t>{99, 123}, o);
  c.restore(saved);
  o.sampling.seed = 3;
  const GenerationResult lib_third = c.generate(kNoPrompt, o);

  auto ids = [](const test::CliResult& r) {
    return nlohmann::json::parse(r.out).at("generated_ids").get<std::vector<int64_t>>();
  };
  EXPECT_EQ(ids(first), lib_first.generated_ids);
  EXPECT_EQ(ids(second), lib_second.generated_ids);
  EXPECT_EQ(ids(third), lib_third.generated_ids);
  const auto j = nlohmann::json::parse(second.out);
  EXPECT_EQ(j.at("prefilled_tokens").get<int64_t>(), 3);  // the pending token + 2 new ones
  EXPECT_EQ(j.at("conversation_tokens").get<int64_t>(), 12 + 20 + 2 + 20);
}

TEST(SnapshotCli, CorruptStateFileIsAOneLineError) {
  TempDir tmp;
  const fs::path state = tmp / "conversation.state";
  const std::string good = golden_snapshot_bytes();
  std::ofstream(state, std::ios::binary) << good.substr(0, good.size() - 20);
  auto r = test::run_cli({"generate", "--model", test::golden_model_dir().string(), "--load-state", state.string(),
                          "--ids", "5", "--max-new-tokens", "2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: " + state.string() + ": truncated snapshot (" + std::to_string(good.size() - 20) +
                       " bytes, the header announces " + std::to_string(good.size()) + ")\n");
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
}  // namespace deltagen
