#include "measure/bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "measure/corpus.h"
#include "measure/progress.h"
#include "util/number_text.h"
#include "runtime/generation.h"
#include "runtime/generator.h"
#include "runtime/sampling.h"
#include "runtime/session.h"
#include "deltagen/error.h"

namespace deltagen::measure {

namespace fs = std::filesystem;

void validate(const BenchOptions& o) {
  if (o.prompt_tokens < 1) fail("--prompt", "needs at least 1 token");
  if (o.gen_tokens < 1) fail("--gen", "needs at least 1 token");
  if (o.warmup < 0) fail("--warmup", "must not be negative");
  if (o.runs < 1) fail("--runs", "needs at least 1 run");
  if (o.batch < 1) fail("--batch", "needs at least 1 row");
  if (o.threads < 0) fail("--threads", "must not be negative");
  if (o.rerun_noisy < 0) fail("--rerun-noisy", "must not be negative");
  if (o.max_foreign_pct < 0) fail("--max-foreign", "must not be negative");
  if (o.mem_bandwidth_gbps < 0) fail("--mem-bandwidth", "must not be negative");
  for (int i = 0; i < 2; ++i) {
    const BenchSpeculation& sp = o.speculation[i];
    check_draft_tokens(i == 0 ? "--draft-tokens" : "--vs-draft-tokens", sp.draft_tokens);
    if (sp.active() && o.batch != 1)
      fail(i == 0 ? "--speculative" : "--vs-speculative", "the bench speculates with batch 1 only");
  }
}

const char* bench_speculation_name(BenchSpeculation::Method method) {
  switch (method) {
    case BenchSpeculation::Method::None: return "none";
    case BenchSpeculation::Method::Ngram: return "ngram";
    case BenchSpeculation::Method::Mtp: return "mtp";
    case BenchSpeculation::Method::Ceiling: return "ceiling";
    case BenchSpeculation::Method::MtpCeiling: return "mtp-ceiling";
  }
  return "?";
}

BenchSpeculation::Method parse_bench_speculation(const std::string& flag, const std::string& name) {
  using M = BenchSpeculation::Method;
  for (auto m : {M::None, M::Ngram, M::Mtp, M::Ceiling, M::MtpCeiling})
    if (name == bench_speculation_name(m)) return m;
  fail(flag, "expected none, ngram, mtp, ceiling or mtp-ceiling, not '" + name + "'");
}

namespace {

// One loaded model with its generator and prompt, ready to run.
class Bench {
 public:
  Bench(const fs::path& dir, std::string label_suffix, const KernelOptions& kernels, std::optional<ExecutionProvider> ep,
        const SessionConfig& session_config, const BenchSpeculation& speculation, const BenchOptions& o)
      : options_(o), speculation_(speculation) {
    const std::string suffix = std::move(label_suffix);  // the session config entries
    info_.dir = dir;
    info_.graph = graph_facts(dir);
    const int64_t rss_before = current_rss_bytes();
    const double t0 = now_seconds();
    // The MTP head's session takes turns with the decoder's: as in generate,
    // the decoder's threads sleep between runs (EngineOptions::idle_threads_sleep).
    using M = BenchSpeculation::Method;
    const bool head = speculation.method == M::Mtp || speculation.method == M::MtpCeiling;
    RuntimeOptions runtime{.intra_op_threads = o.threads, .kernels = kernels, .ep = ep,
                           .session_config = session_config, .idle_threads_sleep = head};
    if (o.profile) {
      profile_folder_ = std::make_unique<ProfileFolder>();
      runtime.profile_prefix = (profile_folder_->path / "ort").string();
    }
    model_ = Model::load(dir, runtime);
    info_.ep = execution_provider_name(model_->ep());
    info_.label = model_label(dir);
    // What ran it: deltagen's or ORT's CPU kernels, or a device provider.
    info_.label += model_->ep() == ExecutionProvider::Cpu ? kernel_set_label(kernels.set) : " [" + info_.ep + "]";
    info_.label += suffix;
    info_.kernels = model_->fast_kernel_nodes() == 0       ? "ort"
                    : kernels.set == KernelSet::DeltagenOps ? "deltagen-ops"
                                                        : "deltagen";
    const int64_t vocab = model_->vocab_size();
    const int64_t context = model_->config().context_length;
    // The last generated token is never run: N + M - 1 tokens per row.
    const int64_t tokens = o.prompt_tokens + o.gen_tokens;
    if (context > 0 && tokens > context)
      fail(dir.string(), "prompt (" + std::to_string(o.prompt_tokens) + ") + generated tokens (" +
                             std::to_string(o.gen_tokens) + ") exceed the context length " + std::to_string(context));
    generator_ = std::make_unique<Generator>(*model_, o.batch, tokens);
    info_.load_seconds = now_seconds() - t0;
    info_.rss_after_load_bytes = current_rss_bytes();
    info_.load_rss_bytes = info_.rss_after_load_bytes - rss_before;
    // Every row its own prompt (seed + row), the same for every model, so
    // that a --vs pair runs identical inputs.
    for (int64_t b = 0; b < o.batch; ++b) {
      auto row = pseudo_random_ids(o.prompt_tokens, vocab, o.seed + uint64_t(b));
      prompt_.insert(prompt_.end(), row.begin(), row.end());
    }
    tokens_.resize(size_t(o.batch));
  }

  BenchModel& info() { return info_; }

  // With --profile: stops the profiler and reads where the time went.
  void read_profile() {
    if (profile_folder_) info_.time_profile = group_runs(read_ort_profile(model_->end_profiling()));
  }

  // One run from an empty state; `what` names it on the progress line.
  BenchRun run(Progress& progress, const std::string& what) {
    const BenchOptions& o = options_;
    BenchRun r;
    progress.show(what + ": prefill " + std::to_string(o.prompt_tokens) + " tokens", true);
    generator_->reset();
    const CpuSample begin = sample_cpu();

    double t0 = now_seconds();
    Logits logits = generator_->forward(prompt_, false);
    r.prefill_seconds = now_seconds() - t0;
    pick_tokens(logits);
    r.ttft_seconds = now_seconds() - t0;

    if (speculation_.active()) {
      decode_speculating(r, progress, what);
      return finish(r, begin);
    }
    r.step_seconds.reserve(size_t(std::max<int64_t>(o.gen_tokens - 2, 0)));
    // Decode as generation does (generation.cpp): Generator::step, whose
    // logits are a view of the bound output (forward() copies them, 1 MB a
    // step at Qwen3.5's vocabulary).
    for (int64_t step = 1; step < o.gen_tokens; ++step) {
      t0 = now_seconds();
      const LogitsView view = generator_->step(tokens_);
      for (int64_t b = 0; b < view.batch; ++b) tokens_[size_t(b)] = argmax(view.row(b, 0), view.vocab);
      const double dt = now_seconds() - t0;
      if (step == 1) r.first_step_seconds = dt;
      else r.step_seconds.push_back(dt);
      progress.show(what + ": decode " + std::to_string(step + 1) + "/" + std::to_string(o.gen_tokens));
    }
    return finish(r, begin);
  }

 private:
  // The decode phase through the generation loop with guesses: the first
  // generated token is its feed, then M - 2 more tokens. A round's tokens
  // arrive together, so step_seconds holds the gaps between tokens as they
  // arrive (0 inside a round): their mean is the time per token.
  void decode_speculating(BenchRun& r, Progress& progress, const std::string& what) {
    const BenchOptions& o = options_;
    if (o.gen_tokens < 2) return;
    GenerationOptions go;
    go.max_new_tokens = o.gen_tokens - 1;
    go.stop_at_eos = false;
    go.speculative.draft_tokens = speculation_.draft_tokens;
    using M = BenchSpeculation::Method;
    if (speculation_.method == M::Ngram) go.speculative.method = SpeculativeMethod::Ngram;
    if (speculation_.method == M::Mtp || speculation_.method == M::MtpCeiling) go.speculative.method = SpeculativeMethod::Mtp;
    go.speculative.accept_every_draft = speculation_.method == M::MtpCeiling;
    if (speculation_.method == M::Ceiling) {
      go.speculative.accept_every_draft = true;
      go.speculative.drafter = [](std::span<const int64_t> context, int64_t k) {
        return std::vector<int64_t>(size_t(k), context.back());  // any ids: every one is kept
      };
    }
    const double t0 = now_seconds();
    double last = t0;
    int64_t seen = 0;
    const std::vector<std::vector<int64_t>> feed = {{tokens_[0]}};
    const GenerationResult g = generate_rows(*generator_, feed, go, nullptr, [&](int64_t, int64_t, std::string_view) {
      const double t = now_seconds();
      if (seen == 0) r.first_step_seconds = t - t0;
      else r.step_seconds.push_back(t - last);
      last = t;
      ++seen;
      progress.show(what + ": decode " + std::to_string(seen + 1) + "/" + std::to_string(o.gen_tokens));
      return true;
    }).at(0);
    r.verify_runs = g.verify_runs;
    r.drafted_tokens = g.drafted_tokens;
    r.accepted_tokens = g.accepted_tokens;
    // Runs after the feed's: rounds, plain steps (one token each), replays.
    // A round chooses its kept guesses + 1 tokens: the bench never stops a
    // row inside a round (no EOS, no stop strings, and a round's guesses are
    // capped to fit max_new_tokens), so the rest of the tokens are plain steps.
    const int64_t round_tokens = g.accepted_tokens + g.verify_runs;
    r.decode_runs = g.verify_runs + (g.decode_steps - round_tokens) + g.replay_runs;
    r.decoded_tokens = g.decode_steps;
    r.decode_seconds = g.decode_seconds;
    r.draft_seconds = g.draft_seconds;
  }

  BenchRun finish(BenchRun& r, const CpuSample& begin) {
    const BenchOptions& o = options_;
    r.meter = interference_between(begin, sample_cpu());
    r.noisy = is_noisy(r.meter, o.max_foreign_pct);
    r.prompt_tps = double(o.batch * o.prompt_tokens) / r.prefill_seconds;
    if (!r.step_seconds.empty()) {
      double sum = 0;
      for (double s : r.step_seconds) sum += s;
      r.gen_tps = double(o.batch) / (sum / double(r.step_seconds.size()));
    } else if (r.first_step_seconds > 0) {
      r.gen_tps = double(o.batch) / r.first_step_seconds;  // M == 2: the only step there is
    }
    return r;
  }

  void pick_tokens(const Logits& logits) {
    for (int64_t b = 0; b < logits.batch; ++b) tokens_[size_t(b)] = argmax(logits.row(b, logits.rows - 1), logits.vocab);
  }

  BenchOptions options_;
  BenchSpeculation speculation_;
  BenchModel info_;
  std::unique_ptr<ProfileFolder> profile_folder_;  // before model_: removed after the session ends
  std::unique_ptr<Model> model_;
  std::unique_ptr<Generator> generator_;
  std::vector<int64_t> prompt_;  // [batch, N]
  std::vector<int64_t> tokens_;  // [batch]: the last generated token of each row
};

BenchStats stats_of(const BenchModel& m, const BenchOptions& o) {
  BenchStats s;
  s.runs = int64_t(m.runs.size());
  std::vector<const BenchRun*> use;
  for (const auto& r : m.runs)
    if (!r.noisy) use.push_back(&r);
  s.clean_runs = int64_t(use.size());
  if (use.empty()) {
    s.noisy_only = true;
    for (const auto& r : m.runs) use.push_back(&r);
  }
  std::vector<double> pp, tg, ttft, first, foreign, steps;
  for (const BenchRun* r : use) {
    pp.push_back(r->prompt_tps);
    tg.push_back(r->gen_tps);
    ttft.push_back(r->ttft_seconds * 1e3);
    first.push_back(r->first_step_seconds * 1e3);
    foreign.push_back(r->meter.foreign_cpu_pct);
    for (double t : r->step_seconds) steps.push_back(t * 1e3);
  }
  s.prompt_tps = summarize(pp);
  s.gen_tps = summarize(tg);
  s.ttft_ms = summarize(ttft);
  s.first_step_ms = summarize(first);
  s.foreign_cpu_pct = summarize(foreign);
  std::sort(steps.begin(), steps.end());
  s.step_p50_ms = percentile_sorted(steps, 50);
  s.step_p90_ms = percentile_sorted(steps, 90);
  s.step_p99_ms = percentile_sorted(steps, 99);
  int64_t runs = 0, decoded = 0, drafted = 0, kept = 0, rounds = 0;
  double seconds = 0, draft_seconds = 0;
  for (const BenchRun* r : use) {
    runs += r->decode_runs;
    decoded += r->decoded_tokens;
    drafted += r->drafted_tokens;
    kept += r->accepted_tokens;
    seconds += r->decode_seconds;
    rounds += r->verify_runs;
    draft_seconds += r->draft_seconds;
  }
  if (runs > 0) {
    s.tokens_per_run = double(decoded) / double(runs);
    s.kept_share = drafted > 0 ? double(kept) / double(drafted) : 0;
    s.run_ms = 1e3 * seconds / double(runs);
    s.draft_ms = rounds > 0 ? 1e3 * draft_seconds / double(rounds) : 0;
  }
  // A decode step reads the weights once for the whole batch.
  s.decode_weight_gbps = double(m.graph.decode_read_bytes()) * (s.gen_tps.mean / double(o.batch)) / 1e9;
  if (o.mem_bandwidth_gbps > 0) s.bandwidth_efficiency = s.decode_weight_gbps / o.mem_bandwidth_gbps;
  return s;
}

}  // namespace

BenchReport run_bench(const std::vector<fs::path>& dirs, const BenchOptions& options) {
  validate(options);
  if (dirs.empty() || dirs.size() > 2) fail("bench", "expected one model, or two with --vs");
  BenchReport report;
  report.options = options;
  Progress progress(options.progress);

  std::vector<std::unique_ptr<Bench>> benches;
  for (size_t i = 0; i < dirs.size(); ++i) {
    progress.show("loading " + dirs[i].string(), true);
    std::string label;
    for (const auto& [key, value] : options.session_config[i]) label += " [" + key + "=" + value + "]";
    const BenchSpeculation& sp = options.speculation[i];
    if (sp.active())
      label += std::string(" [speculative ") + bench_speculation_name(sp.method) + " k=" + std::to_string(sp.draft_tokens) + "]";
    benches.push_back(std::make_unique<Bench>(dirs[i], label, options.kernels[i], options.ep[i],
                                                   options.session_config[i], sp, options));
  }
  const bool vs = benches.size() == 2;
  auto name = [&](size_t i) { return vs ? std::string(i == 0 ? "A " : "B ") : std::string(); };

  // Warm-ups alternate too, so both models see the same machine state.
  for (int64_t w = 0; w < options.warmup; ++w)
    for (size_t i = 0; i < benches.size(); ++i)
      benches[i]->run(progress, name(i) + "warm-up " + std::to_string(w + 1) + "/" + std::to_string(options.warmup));

  // Measured runs (pairs with --vs), then up to rerun_noisy extra ones while
  // fewer than `runs` are clean.
  int64_t clean = 0, extra = 0;
  for (int64_t k = 0; k < options.runs || (clean < options.runs && extra < options.rerun_noisy); ++k) {
    if (k >= options.runs) ++extra;
    bool noisy = false;
    for (size_t i = 0; i < benches.size(); ++i) {
      std::string what = name(i) + "run " + std::to_string(k + 1) + "/" + std::to_string(options.runs);
      if (k >= options.runs) what += " (re-run for a noisy one)";
      BenchRun r = benches[i]->run(progress, what);
      noisy = noisy || r.noisy;
      benches[i]->info().runs.push_back(std::move(r));
    }
    if (!noisy) ++clean;
    if (vs) {
      BenchPair p;
      p.index = k;
      const BenchRun& a = benches[0]->info().runs.back();
      const BenchRun& b = benches[1]->info().runs.back();
      p.prompt_ratio = b.prompt_tps / a.prompt_tps;
      p.gen_ratio = a.gen_tps > 0 ? b.gen_tps / a.gen_tps : 0;
      p.noisy = noisy;
      report.pairs.push_back(p);
    }
  }
  progress.done();

  for (auto& b : benches) {
    b->read_profile();
    b->info().stats = stats_of(b->info(), options);
    report.models.push_back(std::move(b->info()));
  }
  if (vs) {
    std::vector<double> pr, gr;
    for (const auto& p : report.pairs)
      if (!p.noisy) pr.push_back(p.prompt_ratio), gr.push_back(p.gen_ratio);
    if (pr.empty())
      for (const auto& p : report.pairs) pr.push_back(p.prompt_ratio), gr.push_back(p.gen_ratio);
    report.clean_pairs = clean;
    report.prompt_ratio = summarize(pr);
    report.gen_ratio = summarize(gr);
  }
  report.peak_rss_bytes = peak_rss_bytes();
  return report;
}

// ---- reports ------------------------------------------------------------------------

namespace {

// "97.9 ± 2.1" (the ± part only with more than one value).
std::string mean_sd(const Summary& s, const char* f = "%.2f") {
  std::string out = fmt(f, s.mean);
  if (s.n > 1) out += " ± " + fmt(f, s.stddev);
  return out;
}

std::string gib(int64_t bytes) { return fmt("%.2f GiB", double(bytes) / double(1ll << 30)); }
std::string mb(int64_t bytes) { return fmt("%.1f MB", double(bytes) / 1e6); }

std::string run_line(const BenchRun& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%9.3f %9.2f %9.1f %9.2f %8.2f %7.1f %7.1f%s", r.prefill_seconds, r.prompt_tps,
                r.ttft_seconds * 1e3, r.gen_tps, r.first_step_seconds * 1e3, r.meter.foreign_cpu_pct,
                r.meter.steal_pct, r.noisy ? "  NOISY" : "");
  return buf;
}

const char* kRunHeader = "prefill_s    pp t/s   ttft_ms    tg t/s  step1_ms foreign%  steal%";

}  // namespace

std::string to_markdown(const BenchReport& r) {
  const BenchOptions& o = r.options;
  const std::string pp = "pp" + std::to_string(o.prompt_tokens), tg = "tg" + std::to_string(o.gen_tokens);
  std::string out;
  out += "| model | nodes | weights | read/step | threads | batch | " + pp + " t/s | " + tg +
         " t/s | TTFT ms | step p50/p90/p99 ms | decode weight GB/s" + (o.mem_bandwidth_gbps > 0 ? " (of membw)" : "") +
         " | load s | peak RSS | clean runs | foreign CPU % |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (size_t i = 0; i < r.models.size(); ++i) {
    const BenchModel& m = r.models[i];
    const BenchStats& s = m.stats;
    std::string label = (r.models.size() == 2 ? std::string(i == 0 ? "A: " : "B: ") : std::string()) + m.label;
    std::string bw = fmt("%.2f", s.decode_weight_gbps);
    if (s.bandwidth_efficiency > 0) bw += fmt(" (%.0f %%)", 100 * s.bandwidth_efficiency);
    out += "| " + label + " | " + std::to_string(m.graph.node_count) + " | " + mb(m.graph.weight_bytes) + " | " +
           mb(m.graph.decode_read_bytes()) + " | " + (o.threads ? std::to_string(o.threads) : std::string("default")) +
           " | " + std::to_string(o.batch) + " | " + mean_sd(s.prompt_tps) + " | " + mean_sd(s.gen_tps) + " | " +
           mean_sd(s.ttft_ms, "%.1f") + " | " + fmt("%.2f", s.step_p50_ms) + " / " + fmt("%.2f", s.step_p90_ms) +
           " / " + fmt("%.2f", s.step_p99_ms) + " | " + bw + " | " + fmt("%.2f", m.load_seconds) + " | " +
           gib(r.peak_rss_bytes) + " | " + std::to_string(s.clean_runs) + "/" + std::to_string(s.runs) +
           (s.noisy_only ? " (all noisy)" : "") + " | " + fmt("%.1f", s.foreign_cpu_pct.max) + " max |\n";
  }
  bool speculating = false;
  for (const BenchModel& m : r.models) speculating |= m.stats.tokens_per_run > 0;
  if (speculating) {
    out += "\n| model | decode runs: mean ms | tokens per run | guesses kept | guessing: ms per verify run |\n"
           "|---|---:|---:|---:|---:|\n";
    for (size_t i = 0; i < r.models.size(); ++i) {
      const BenchModel& m = r.models[i];
      const BenchStats& s = m.stats;
      const std::string label = (r.models.size() == 2 ? std::string(i == 0 ? "A: " : "B: ") : std::string()) + m.label;
      if (s.tokens_per_run > 0)
        out += "| " + label + " | " + fmt("%.2f", s.run_ms) + " | " + fmt("%.2f", s.tokens_per_run) + " | " +
               fmt("%.1f %%", 100 * s.kept_share) + " | " + fmt("%.2f", s.draft_ms) + " |\n";
      else  // a plain model: one step per token
        out += "| " + label + " | " + fmt("%.2f", s.gen_tps.mean > 0 ? 1e3 / s.gen_tps.mean : 0.0) + " | 1.00 | - | - |\n";
    }
  }
  if (r.models.size() == 2) {
    out += "\n| B / A over " + std::to_string(r.prompt_ratio.n) + (r.clean_pairs ? " clean" : " (all noisy)") +
           " pairs | geomean | min | max |\n|---|---:|---:|---:|\n";
    out += "| " + pp + " | " + fmt("%.3f", r.prompt_ratio.geomean) + " | " + fmt("%.3f", r.prompt_ratio.min) + " | " +
           fmt("%.3f", r.prompt_ratio.max) + " |\n";
    out += "| " + tg + " | " + fmt("%.3f", r.gen_ratio.geomean) + " | " + fmt("%.3f", r.gen_ratio.min) + " | " +
           fmt("%.3f", r.gen_ratio.max) + " |\n";
  }
  for (const BenchModel& m : r.models)
    if (!m.time_profile.empty())
      out += "\n## Where the time goes: " + m.label + " (ONNX Runtime's profile, warm-ups included; it slows every node a"
             " little)\n" + time_profile_markdown(m.time_profile);
  return out;
}

std::string to_text(const BenchReport& r) {
  const BenchOptions& o = r.options;
  std::string out;
  out += "bench: prompt " + std::to_string(o.prompt_tokens) + " tokens, " + std::to_string(o.gen_tokens) +
         " generated (greedy), batch " + std::to_string(o.batch) + ", " + std::to_string(o.warmup) + " warm-up + " +
         std::to_string(o.runs) + " runs" + (r.models.size() == 2 ? " alternating A B" : "") + ", threads " +
         (o.threads ? std::to_string(o.threads) : std::string("default")) + "\n";
  for (size_t i = 0; i < r.models.size(); ++i) {
    const BenchModel& m = r.models[i];
    out += std::string(r.models.size() == 2 ? (i == 0 ? "A: " : "B: ") : "model: ") + m.dir.string() + " (" +
           std::to_string(m.graph.node_count) + " nodes, " + mb(m.graph.weight_bytes) + " weights, load " +
           fmt("%.2f", m.load_seconds) + " s, +" + gib(m.load_rss_bytes) + " RSS)\n";
  }
  out += "\n";
  for (size_t k = 0; k < r.models[0].runs.size(); ++k) {
    if (k == 0) out += std::string(r.models.size() == 2 ? "run model " : "run ") + kRunHeader + "\n";
    for (size_t i = 0; i < r.models.size(); ++i) {
      out += fmt("%3.0f", double(k + 1));
      if (r.models.size() == 2) out += i == 0 ? "   A  " : "   B  ";
      out += ' ';  // appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on " " + string
      out += run_line(r.models[i].runs[k]);
      out += '\n';
    }
    if (r.models.size() == 2) {
      const BenchPair& p = r.pairs[k];
      out += "      B/A pp " + fmt("%.3f", p.prompt_ratio) + "  tg " + fmt("%.3f", p.gen_ratio) +
             (p.noisy ? "  (noisy pair)" : "") + "\n";
    }
  }
  out += "foreign% = CPU time of other processes during the run, % of one core; NOISY = above " +
         fmt("%.0f", o.max_foreign_pct) + " % (and more than the clock tick's resolution). Summaries use the clean runs.\n";
  out += "\n" + to_markdown(r);
  return out;
}

nlohmann::json to_json(const BenchReport& r) {
  using nlohmann::json;
  const BenchOptions& o = r.options;
  json j;
  j["options"] = {{"prompt_tokens", o.prompt_tokens}, {"gen_tokens", o.gen_tokens},     {"warmup", o.warmup},
                  {"runs", o.runs},                   {"batch", o.batch},               {"threads", o.threads},
                  {"seed", o.seed},                   {"max_foreign_pct", o.max_foreign_pct},
                  {"rerun_noisy", o.rerun_noisy},     {"mem_bandwidth_gbps", o.mem_bandwidth_gbps}};
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["models"] = json::array();
  for (const auto& m : r.models) {
    json runs = json::array();
    for (const auto& run : m.runs) {
      runs.push_back({{"prefill_seconds", run.prefill_seconds},
                      {"ttft_seconds", run.ttft_seconds},
                      {"first_step_seconds", run.first_step_seconds},
                      {"step_seconds", run.step_seconds},
                      {"prompt_tps", run.prompt_tps},
                      {"gen_tps", run.gen_tps},
                      {"wall_seconds", run.meter.wall_seconds},
                      {"foreign_cpu_seconds", run.meter.foreign_cpu_seconds},
                      {"foreign_cpu_pct", run.meter.foreign_cpu_pct},
                      {"steal_pct", run.meter.steal_pct},
                      {"self_cpu_pct", run.meter.self_cpu_pct},
                      {"noisy", run.noisy}});
      if (run.decode_runs > 0)
        runs.back()["speculation"] = {{"decode_runs", run.decode_runs},         {"decoded_tokens", run.decoded_tokens},
                                      {"verify_runs", run.verify_runs},         {"drafted_tokens", run.drafted_tokens},
                                      {"accepted_tokens", run.accepted_tokens}, {"decode_seconds", run.decode_seconds}};
    }
    const BenchStats& s = m.stats;
    j["models"].push_back({{"label", m.label},
                           {"dir", m.dir.string()},
                           {"kernels", m.kernels},
                           {"ep", m.ep},
                           {"graph", to_json(m.graph)},
                           {"load_seconds", m.load_seconds},
                           {"rss_after_load_bytes", m.rss_after_load_bytes},
                           {"load_rss_bytes", m.load_rss_bytes},
                           {"runs", runs},
                           {"summary",
                            {{"runs", s.runs},
                             {"clean_runs", s.clean_runs},
                             {"noisy_only", s.noisy_only},
                             {"prompt_tps", to_json(s.prompt_tps)},
                             {"gen_tps", to_json(s.gen_tps)},
                             {"ttft_ms", to_json(s.ttft_ms)},
                             {"first_step_ms", to_json(s.first_step_ms)},
                             {"step_p50_ms", s.step_p50_ms},
                             {"step_p90_ms", s.step_p90_ms},
                             {"step_p99_ms", s.step_p99_ms},
                             {"foreign_cpu_pct", to_json(s.foreign_cpu_pct)},
                             {"decode_weight_gbps", s.decode_weight_gbps},
                             {"bandwidth_efficiency", s.bandwidth_efficiency}}}});
    if (!m.time_profile.empty()) j["models"].back()["time_profile"] = time_profile_json(m.time_profile);
    if (s.tokens_per_run > 0)
      j["models"].back()["summary"]["speculation"] = {
          {"tokens_per_run", s.tokens_per_run}, {"kept_share", s.kept_share}, {"run_ms", s.run_ms},
          {"draft_ms", s.draft_ms}};
  }
  if (r.models.size() == 2) {
    json pairs = json::array();
    for (const auto& p : r.pairs)
      pairs.push_back({{"index", p.index}, {"prompt_ratio", p.prompt_ratio}, {"gen_ratio", p.gen_ratio}, {"noisy", p.noisy}});
    j["pairs"] = pairs;
    j["ratio"] = {{"clean_pairs", r.clean_pairs}, {"prompt", to_json(r.prompt_ratio)}, {"generation", to_json(r.gen_ratio)}};
  }
  return j;
}

}  // namespace deltagen::measure
