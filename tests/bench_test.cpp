// deltagen bench and its parts (statistics, the interference and memory
// meters, bytes read per decode step) on tiny models: every reported field is
// present and sane. Timing itself is noisy on a shared machine, so the tests
// check signs, orderings and loose ratios, never tight numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "measure/bench.h"
#include "measure/graph_facts.h"
#include "measure/meters.h"
#include "measure/stats.h"
#include "models/build.h"
#include "synth/synth.h"
#include "runtime_fixtures.h"
#include "test_util.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using measure::BenchOptions;
using measure::BenchReport;
using test::golden_checkpoint;
using test::run_cli;
using test::TempDir;

using test::golden_model_dir;  // one fp32 build of the golden checkpoint per process

// Small and quick: the tests check the fields, not the speed.
BenchOptions small_options() {
  BenchOptions o;
  o.prompt_tokens = 16;
  o.gen_tokens = 6;
  o.warmup = 1;
  o.runs = 2;
  o.threads = 1;
  return o;
}

// The meter cannot report more CPU than the machine has: other processes'
// time and the hypervisor's steal fit in (online CPUs x wall time), give or
// take one clock tick per CPU at each end of the interval. (Both are clamped
// at 0, so a lower bound would test nothing.) A unit slip -- ticks read as
// seconds, a percentage of all CPUs for one of a core -- breaks this by 100x.
void expect_within_the_machine(const measure::Interference& m) {
  const double cpus = double(::sysconf(_SC_NPROCESSORS_ONLN));
  const double most = cpus * (m.wall_seconds + 2 * measure::clock_tick_seconds());
  EXPECT_LE(m.foreign_cpu_seconds, most) << "over " << m.wall_seconds << " s on " << cpus << " CPUs";
  EXPECT_LE(m.foreign_cpu_pct * m.wall_seconds / 100, most * (1 + 1e-12));
  EXPECT_LE(m.steal_pct * m.wall_seconds / 100, most * (1 + 1e-12));
}

void expect_sane_model(const measure::BenchModel& m, const BenchOptions& o) {
  EXPECT_GT(m.graph.node_count, 0);
  EXPECT_GT(m.graph.weight_bytes, 0);
  EXPECT_GT(m.graph.decode_read_bytes(), 0);
  EXPECT_LE(m.graph.decode_read_bytes(), m.graph.weight_bytes);
  EXPECT_GT(m.load_seconds, 0);
  EXPECT_GT(m.rss_after_load_bytes, 0);
  ASSERT_EQ(int64_t(m.runs.size()), o.runs);  // rerun_noisy is 0: never more
  for (const auto& r : m.runs) {
    EXPECT_GT(r.prefill_seconds, 0);
    EXPECT_GE(r.ttft_seconds, r.prefill_seconds);
    EXPECT_GT(r.first_step_seconds, 0);
    ASSERT_EQ(int64_t(r.step_seconds.size()), o.gen_tokens - 2);  // the first decode step is reported apart
    for (double s : r.step_seconds) EXPECT_GT(s, 0);
    EXPECT_NEAR(r.prompt_tps, double(o.batch * o.prompt_tokens) / r.prefill_seconds, 1e-6 * r.prompt_tps);
    EXPECT_GT(r.gen_tps, 0);
    EXPECT_GT(r.meter.wall_seconds, 0);
    expect_within_the_machine(r.meter);
  }
  const auto& s = m.stats;
  EXPECT_EQ(s.runs, o.runs);
  EXPECT_LE(s.clean_runs, s.runs);
  EXPECT_EQ(s.noisy_only, s.clean_runs == 0);
  EXPECT_GT(s.prompt_tps.mean, 0);
  EXPECT_GT(s.gen_tps.mean, 0);
  EXPECT_GT(s.ttft_ms.mean, 0);
  EXPECT_GT(s.step_p50_ms, 0);
  EXPECT_LE(s.step_p50_ms, s.step_p90_ms);
  EXPECT_LE(s.step_p90_ms, s.step_p99_ms);
  EXPECT_NEAR(s.decode_weight_gbps, double(m.graph.decode_read_bytes()) * s.gen_tps.mean / double(o.batch) / 1e9,
              1e-9 * s.decode_weight_gbps + 1e-12);
}

// ---- statistics and meters -----------------------------------------------------------

TEST(Stats, SummaryAndPercentiles) {
  const std::vector<double> v = {4, 1, 3, 2, 5};
  measure::Summary s = measure::summarize(v);
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_NEAR(s.stddev, std::sqrt(2.5), 1e-12);
  EXPECT_NEAR(s.geomean, std::pow(120.0, 0.2), 1e-12);
  EXPECT_DOUBLE_EQ(measure::percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(measure::percentile(v, 100), 5);
  EXPECT_DOUBLE_EQ(measure::percentile(v, 90), 4.6);  // numpy: linear between closest ranks
  EXPECT_EQ(measure::summarize(std::vector<double>{}).n, 0);
  EXPECT_DOUBLE_EQ(measure::summarize(std::vector<double>{7}).stddev, 0);
  EXPECT_DOUBLE_EQ(measure::percentile(std::vector<double>{}, 50), 0);
}

TEST(Meters, CountOwnCpuTimeAndMemory) {
  const measure::CpuSample a = measure::sample_cpu();
  // Busy for ~50 ms: this process's CPU time must grow, and it is not "foreign".
  volatile double x = 0;
  while (measure::now_seconds() - a.wall < 0.05) x = x + 1;
  const measure::CpuSample b = measure::sample_cpu();
  EXPECT_GT(b.self, a.self);
  EXPECT_GE(b.busy_all, a.busy_all);
  const measure::Interference m = measure::interference_between(a, b);
  EXPECT_GE(m.wall_seconds, 0.05);
  expect_within_the_machine(m);
  EXPECT_GT(m.self_cpu_pct, 0);
  EXPECT_GT(measure::peak_rss_bytes(), 0);
  EXPECT_GE(measure::peak_rss_bytes(), measure::current_rss_bytes());

  measure::Interference busy;
  busy.wall_seconds = 1;
  busy.foreign_cpu_seconds = 0.5;
  busy.foreign_cpu_pct = 50;
  EXPECT_TRUE(measure::is_noisy(busy, 15));
  EXPECT_FALSE(measure::is_noisy(busy, 60));
  // One tick in a 20 ms run reads 50 %, but that is the kernel's resolution, not noise.
  measure::Interference tick;
  tick.wall_seconds = 0.02;
  tick.foreign_cpu_seconds = measure::clock_tick_seconds();
  tick.foreign_cpu_pct = 100 * tick.foreign_cpu_seconds / tick.wall_seconds;
  EXPECT_FALSE(measure::is_noisy(tick, 15));
}

// ---- bytes read per decode step --------------------------------------------------------

TEST(GraphFacts, TiedEmbeddingIsReadInFullTheRotaryCacheIsNot) {
  measure::GraphFacts f = measure::graph_facts(golden_model_dir());
  // Tied: the lm_head multiplies the embedding table, so only the cos/sin
  // caches ([context, rotary_dim / 2] fp32 each) are row-indexed.
  const ModelConfig cfg = Checkpoint::open(golden_checkpoint())->config();
  EXPECT_EQ(f.row_indexed_bytes, 2 * cfg.max_position_embeddings * (cfg.rotary_dim() / 2) * 4);
  EXPECT_GT(f.decode_read_bytes(), cfg.vocab_size * cfg.hidden_size * 4);
  EXPECT_GT(f.op_counts.at("com.microsoft.LinearAttention"), 0);
}

TEST(GraphFacts, UntiedEmbeddingTableIsOnlyRowIndexed) {
  TempDir dir;
  ModelConfig cfg = synth_preset("tiny");
  cfg.tie_word_embeddings = false;
  write_synthetic_checkpoint(cfg, SynthOptions{}, dir / "ckpt");
  BuildOptions b;
  b.context_length = 256;
  b.show_progress = false;
  build_model(*Checkpoint::open(dir / "ckpt"), b, dir / "model");
  measure::GraphFacts f = measure::graph_facts(dir / "model");
  const int64_t embedding = cfg.vocab_size * cfg.hidden_size * 4;
  const int64_t rotary = 2 * 256 * (cfg.rotary_dim() / 2) * 4;
  EXPECT_EQ(f.row_indexed_bytes, embedding + rotary);
  EXPECT_EQ(f.decode_read_bytes(), f.weight_bytes - embedding - rotary);
}

// The quantized embedding reads its own table through a Reshape: still only rows.
TEST(GraphFacts, QuantizedUntiedEmbeddingIsOnlyRowIndexed) {
  TempDir dir;
  ModelConfig cfg = synth_preset("tiny");
  cfg.tie_word_embeddings = false;
  write_synthetic_checkpoint(cfg, SynthOptions{}, dir / "ckpt");
  BuildOptions b;
  b.precision = Precision::Int4;
  b.block_size = 16;
  b.context_length = 256;
  b.show_progress = false;
  build_model(*Checkpoint::open(dir / "ckpt"), b, dir / "model");
  measure::GraphFacts f = measure::graph_facts(dir / "model");
  const int64_t codes = cfg.vocab_size * cfg.hidden_size / 2, scales = cfg.vocab_size * cfg.hidden_size / 16 * 4;
  const int64_t rotary = 2 * 256 * (cfg.rotary_dim() / 2) * 4;
  EXPECT_EQ(f.row_indexed_bytes, codes + scales + rotary);
}

// ---- the benchmark -------------------------------------------------------------------------

TEST(Bench, OneModelReportsEveryField) {
  const BenchOptions o = small_options();
  BenchReport r = measure::run_bench({golden_model_dir()}, o);
  ASSERT_EQ(r.models.size(), 1u);
  expect_sane_model(r.models[0], o);
  EXPECT_TRUE(r.pairs.empty());
  EXPECT_GT(r.peak_rss_bytes, 0);
  EXPECT_EQ(r.models[0].label, golden_model_dir().filename().string());  // the folder names it

  // Every report form carries the numbers.
  nlohmann::json j = measure::to_json(r);
  for (const char* key : {"prompt_tps", "gen_tps", "ttft_ms", "first_step_ms", "step_p50_ms", "step_p90_ms",
                          "step_p99_ms", "foreign_cpu_pct", "decode_weight_gbps", "clean_runs"})
    EXPECT_TRUE(j["models"][0]["summary"].contains(key)) << key;
  for (const char* key : {"prefill_seconds", "ttft_seconds", "step_seconds", "foreign_cpu_pct", "steal_pct", "noisy"})
    EXPECT_TRUE(j["models"][0]["runs"][0].contains(key)) << key;
  EXPECT_EQ(j["models"][0]["graph"]["node_count"], r.models[0].graph.node_count);
  const std::string md = measure::to_markdown(r);
  EXPECT_NE(md.find("pp16 t/s"), std::string::npos) << md;
  EXPECT_NE(md.find("tg6 t/s"), std::string::npos) << md;
  EXPECT_NE(measure::to_text(r).find("foreign%"), std::string::npos);
}

TEST(Bench, BatchOfTwoCountsBothRows) {
  BenchOptions o = small_options();
  o.batch = 2;
  o.runs = 1;
  o.warmup = 0;
  BenchReport r = measure::run_bench({golden_model_dir()}, o);
  expect_sane_model(r.models[0], o);
}

TEST(Bench, VsSameModelGivesRatiosNearOne) {
  BenchOptions o = small_options();
  o.runs = 3;
  o.mem_bandwidth_gbps = 10;
  BenchReport r = measure::run_bench({golden_model_dir(), golden_model_dir()}, o);
  ASSERT_EQ(r.models.size(), 2u);
  expect_sane_model(r.models[0], o);
  expect_sane_model(r.models[1], o);
  ASSERT_EQ(r.pairs.size(), 3u);
  std::vector<double> prompt_ratios, gen_ratios;
  for (const auto& p : r.pairs) {
    EXPECT_TRUE(std::isfinite(p.prompt_ratio) && p.prompt_ratio > 0);
    EXPECT_TRUE(std::isfinite(p.gen_ratio) && p.gen_ratio > 0);
    EXPECT_NEAR(p.prompt_ratio, r.models[1].runs[size_t(p.index)].prompt_tps / r.models[0].runs[size_t(p.index)].prompt_tps,
                1e-9 * p.prompt_ratio);
    EXPECT_NEAR(p.gen_ratio, r.models[1].runs[size_t(p.index)].gen_tps / r.models[0].runs[size_t(p.index)].gen_tps,
                1e-9 * p.gen_ratio);
    prompt_ratios.push_back(p.prompt_ratio);
    gen_ratios.push_back(p.gen_ratio);
  }
  // The same model against itself: 1 up to timing noise, which for runs of a
  // millisecond on a loaded 2-core machine reaches 10x for single pairs (a
  // preempted step). The median only leaves this wide band for gross errors
  // (a unit or batch factor, swapped sides of a fraction).
  EXPECT_GT(measure::percentile(prompt_ratios, 50), 0.05);
  EXPECT_LT(measure::percentile(prompt_ratios, 50), 20);
  EXPECT_GT(measure::percentile(gen_ratios, 50), 0.05);
  EXPECT_LT(measure::percentile(gen_ratios, 50), 20);
  EXPECT_GT(r.models[0].stats.bandwidth_efficiency, 0);
  nlohmann::json j = measure::to_json(r);
  EXPECT_EQ(j["pairs"].size(), 3u);
  EXPECT_TRUE(j["ratio"].contains("generation"));
  EXPECT_NE(measure::to_markdown(r).find("B / A"), std::string::npos);
}

// B speculates with the ceiling drafter (k guesses every round, all kept):
// every round chooses k + 1 tokens in one run, so the decode phase's tokens
// per run is exactly k + 1 where the rounds fit (the last may be shorter).
TEST(Bench, SpeculationCeilingCountsTokensPerRun) {
  BenchOptions o = small_options();
  o.gen_tokens = 2 + 4 * 5;  // the feed's token, then 5 rounds of 1 + 3
  o.runs = 2;
  o.speculation[1] = {.method = measure::BenchSpeculation::Method::Ceiling, .draft_tokens = 3};
  BenchReport r = measure::run_bench({golden_model_dir(), golden_model_dir()}, o);
  ASSERT_EQ(r.models.size(), 2u);
  for (const measure::BenchRun& run : r.models[1].runs) {
    EXPECT_EQ(run.decoded_tokens, 20);
    EXPECT_EQ(run.verify_runs, 5);
    EXPECT_EQ(run.decode_runs, 5);
    EXPECT_EQ(run.accepted_tokens, 15);
    EXPECT_EQ(run.step_seconds.size(), 20u);  // one gap per token after the first
  }
  EXPECT_DOUBLE_EQ(r.models[1].stats.tokens_per_run, 4.0);
  EXPECT_DOUBLE_EQ(r.models[1].stats.kept_share, 1.0);
  EXPECT_EQ(r.models[0].stats.tokens_per_run, 0);  // A decodes plainly
  EXPECT_NE(r.models[1].label.find("[speculative ceiling k=3]"), std::string::npos) << r.models[1].label;
  const nlohmann::json j = measure::to_json(r);
  EXPECT_EQ(j["models"][1]["summary"]["speculation"]["tokens_per_run"], 4.0);
  EXPECT_NE(measure::to_markdown(r).find("tokens per run"), std::string::npos);
  o.batch = 2;
  EXPECT_THROW(measure::run_bench({golden_model_dir()}, o), Error);  // batch 1 only
}

TEST(TimeProfile, PlacesFoldLayerNumbersAndDropTheNodesOwnName) {
  EXPECT_EQ(measure::node_place("/model/layers.13/linear_attn/in_proj/MatMul_Q4"), "layers.N/linear_attn/in_proj");
  EXPECT_EQ(measure::node_place("/model/layers.3/attn/GroupQueryAttention"), "layers.N/attn");
  EXPECT_EQ(measure::node_place("/lm_head/MatMul_Q4"), "lm_head");
  EXPECT_EQ(measure::node_place("/model/layers.x7/mlp/Mul"), "layers.x7/mlp");  // not a layer number
  EXPECT_EQ(measure::node_place("MatMulNBits_fused_42"), "MatMulNBits_fused_42");  // ORT's own names stay
}

// --profile: the runs are grouped by the positions they fed (the prompt, the
// verify runs of k + 1 = 4, the feed's one-token run), each group's shares
// adding up to its kernel time.
TEST(Bench, ProfileGroupsRunsByPositions) {
  BenchOptions o = small_options();
  o.warmup = 1;
  o.runs = 1;
  o.gen_tokens = 2 + 4 * 2;  // the feed's token, then 2 rounds of 1 + 3
  o.speculation[0] = {.method = measure::BenchSpeculation::Method::Ceiling, .draft_tokens = 3};
  o.profile = true;
  BenchReport r = measure::run_bench({golden_model_dir()}, o);
  const std::vector<measure::RunGroup>& groups = r.models.at(0).time_profile;
  ASSERT_EQ(groups.size(), 3u) << measure::to_markdown(r);
  EXPECT_EQ(groups[0].positions, o.prompt_tokens);
  EXPECT_EQ(groups[0].runs, 2);  // the warm-up's prompt and the run's
  EXPECT_EQ(groups[1].positions, 4);
  EXPECT_EQ(groups[1].runs, 4);
  EXPECT_EQ(groups[2].positions, 1);
  EXPECT_EQ(groups[2].runs, 2);
  for (const measure::RunGroup& g : groups) {
    double place = 0, op = 0, ms = 0;
    for (const auto& s : g.by_place) place += s.share, ms += s.ms_per_run;
    for (const auto& s : g.by_op) op += s.share;
    EXPECT_NEAR(place, 1.0, 1e-9);
    EXPECT_NEAR(op, 1.0, 1e-9);
    EXPECT_NEAR(ms, g.kernel_ms, 1e-6 * g.kernel_ms);
    EXPECT_GT(g.kernel_ms, 0);
    EXPECT_LE(g.kernel_ms, g.run_ms * 1.0001);  // one thread: nodes run one after another inside the run
    bool linear_attn = false;
    for (const auto& s : g.by_place) linear_attn = linear_attn || s.key == "layers.N/linear_attn";
    EXPECT_TRUE(linear_attn) << "the fused Gated DeltaNet node's place";
  }
  EXPECT_NE(measure::to_markdown(r).find("### runs of 4 positions per row: 4 runs"), std::string::npos);
  EXPECT_EQ(measure::to_json(r)["models"][0]["time_profile"][1]["positions"], 4);
}

TEST(Bench, RejectsImpossibleOptions) {
  BenchOptions o = small_options();
  o.runs = 0;
  EXPECT_THROW(measure::run_bench({golden_model_dir()}, o), Error);
  o = small_options();
  o.prompt_tokens = 5000;  // the golden model serves 4096 positions
  EXPECT_THROW(measure::run_bench({golden_model_dir()}, o), Error);
  EXPECT_THROW(measure::run_bench({}, small_options()), Error);
}

// ---- the CLI ------------------------------------------------------------------------------

TEST(BenchCli, JsonAndMarkdown) {
  const std::string dir = golden_model_dir().string();
  auto r = run_cli({"bench", "--model", dir, "--prompt", "12", "--gen", "4", "--runs", "2", "--threads", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no progress lines without a terminal
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["options"]["prompt_tokens"], 12);
  EXPECT_EQ(j["models"][0]["runs"].size(), 2u);
  EXPECT_GT(j["models"][0]["summary"]["prompt_tps"]["mean"].get<double>(), 0);
  EXPECT_GT(j["peak_rss_bytes"].get<int64_t>(), 0);

  r = run_cli({"bench", "--model", dir, "--vs", dir, "--prompt", "12", "--gen", "4", "--runs", "2", "--warmup", "0",
               "--threads", "1", "--markdown"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string label = golden_model_dir().filename().string();  // the folder names the model
  EXPECT_NE(r.out.find("| A: " + label + " |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| B: " + label + " |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4 |"), std::string::npos) << r.out;
}

// --session-config reaches the session: a load format that cannot read an
// .onnx file fails the load, the matching one runs and names the entry.
TEST(BenchCli, SessionConfigEntriesReachTheSession) {
  const std::string dir = golden_model_dir().string();
  const std::vector<std::string> base = {"bench", "--model", dir, "--prompt", "8", "--gen", "3", "--runs", "1",
                                         "--warmup", "0", "--threads", "1", "--markdown"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run_cli(a);
  };
  auto r = with({"--session-config", "session.load_model_format=ORT"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model.onnx"), std::string::npos) << r.err;
  r = with({"--vs", dir, "--vs-session-config", "session.load_model_format=ORT"});
  EXPECT_EQ(r.exit_code, 1) << "the B side's entries must reach B's session";
  r = with({"--vs", dir, "--vs-session-config", "session.load_model_format=ONNX,session.disable_prepacking=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string label = golden_model_dir().filename().string();
  EXPECT_NE(r.out.find("| A: " + label + " |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| B: " + label + " [session.load_model_format=ONNX] [session.disable_prepacking=1] |"),
            std::string::npos)
      << r.out;
  for (const char* bad : {"nokey", "=1", "a=1,,b=2"}) {
    r = with({"--session-config", bad});
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_NE(r.err.find("--session-config"), std::string::npos) << r.err;
  }
}

TEST(BenchCli, BadInput) {
  auto r = run_cli({"bench"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
  r = run_cli({"bench", "--model", golden_model_dir().string(), "--runs", "0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--runs"), std::string::npos) << r.err;
  r = run_cli({"bench", "--model", golden_model_dir().string(), "--bogus", "1"});
  EXPECT_EQ(r.exit_code, 1);
  r = run_cli({"bench", "--model", golden_model_dir().string(), "--speculative", "magic"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--speculative: expected none, ngram, mtp, ceiling or mtp-ceiling, not 'magic'"), std::string::npos) << r.err;
  r = run_cli({"bench", "--model", golden_model_dir().string(), "--vs-draft-tokens", "0"});
  EXPECT_NE(r.err.find("--vs-draft-tokens: must be between 1 and 8, not 0"), std::string::npos) << r.err;
  r = run_cli({"bench", "--model", "/nonexistent/model"});
  EXPECT_EQ(r.exit_code, 1);
}

// `deltagen bench-serve` is an HTTP client of servers the CLI starts on the
// golden model (with the tiny tokenizer): every part reports, the cached
// conversation prefills only what is new, and cache on and off agree. The two
// streams must share decode steps for the 2-row rate to exist: they leave
// together, and 200 tokens each keep them overlapping on a loaded machine
// (with 48, one stream once finished before the other decoded: a 0 rate).
TEST(BenchServe, CliMeasuresStreamsTurnsAndHttp) {
  const std::string dir = test::golden_chat_model_dir().string();
  const auto r = run_cli({"bench-serve", "--model", dir, "--streams", "1,2", "--prompt", "8", "--gen", "200", "--runs", "1",
                          "--turns", "3", "--turn-tokens", "12", "--reply", "4", "--http-tokens", "6", "--threads", "1",
                          "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["streams"].size(), 2u) << r.out;
  for (const auto& row : j["streams"]) {
    EXPECT_GT(row["decode_tokens_per_second"].get<double>(), 0) << row;
    EXPECT_GT(row["step_ms"].get<double>(), 0) << row;
  }
  EXPECT_DOUBLE_EQ(j["streams"][0]["speedup"].get<double>(), 1.0);
  ASSERT_EQ(j["turns"].size(), 3u) << r.out;
  for (size_t k = 0; k < 3; ++k) {
    const auto& t = j["turns"][k];
    EXPECT_TRUE(t["same_reply"].get<bool>()) << t;
    EXPECT_EQ(t["uncached_prefilled_tokens"], t["prompt_tokens"]) << t;
    EXPECT_EQ(t["cached_tokens"].get<int64_t>() + t["prefilled_tokens"].get<int64_t>(), t["prompt_tokens"].get<int64_t>()) << t;
    if (k > 0) EXPECT_GT(t["cached_tokens"].get<int64_t>(), 0) << "turn " << k + 1 << ": " << t;
  }
  ASSERT_EQ(j["http"].size(), 1u);
  EXPECT_EQ(j["http"][0]["tokens"], 6);
  // A time, not a property: on this tiny model the whole stream can arrive in
  // one read (then 0). Speed is measured by the bench, not asserted here.
  EXPECT_GE(j["http"][0]["client_ms_per_token"].get<double>(), 0);
}

}  // namespace
}  // namespace deltagen
