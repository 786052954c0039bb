#include "measure/compare.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "measure/corpus.h"
#include "measure/meters.h"
#include "measure/progress.h"
#include "measure/stats.h"
#include "util/number_text.h"
#include "reference/qwen35_reference.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "runtime/tensor.h"
#include "synth/synth.h"
#include "deltagen/error.h"

namespace deltagen::measure {

namespace fs = std::filesystem;

void validate(const CompareOptions& o) {
  if (o.context < 2) fail("--context", "needs at least 2 tokens (one scored position)");
  if (o.chunk < 1) fail("--chunk", "needs at least 1 token");
  if (o.greedy_prompt < 1) fail("--greedy-prompt", "needs at least 1 token");
  if (o.greedy_tokens < 0) fail("--greedy-tokens", "must not be negative");
  if (o.threads < 0) fail("--threads", "must not be negative");
}

// ---- sources ------------------------------------------------------------------------

namespace {

class OnnxSource : public LogitSource {
 public:
  OnnxSource(const fs::path& dir, int threads, int64_t max_length, KernelSet kernels, bool layers,
             std::optional<ExecutionProvider> ep) {
    model_ = Model::load(dir, RuntimeOptions{.intra_op_threads = threads, .kernels = {.set = kernels}, .ep = ep});
    name_ = model_label(dir) + (model_->ep() == ExecutionProvider::Cpu
                                    ? kernel_set_label(kernels)
                                    : std::string(" [") + execution_provider_name(model_->ep()) + "]");
    const int64_t context = model_->config().context_length;
    if (context > 0 && max_length > context)
      fail(dir.string(), "needs " + std::to_string(max_length) + " tokens of context, the model serves " +
                             std::to_string(context) + " (lower --context / --greedy-tokens or rebuild)");
    generator_ = std::make_unique<Generator>(*model_, 1, max_length);
    if (layers) keep_layers(dir);
  }
  std::string name() const override { return name_; }
  int64_t vocab() const override { return model_->vocab_size(); }
  int64_t context_length() const override { return generator_->max_length(); }
  void reset() override { generator_->reset(); }
  void feed(std::span<const int64_t> ids, std::vector<double>& logits) override {
    Logits l = generator_->forward(ids, true);
    logits.assign(l.data.begin(), l.data.end());
    if (!layers_) return;
    for (size_t k = 0; k < layers_->streams.size(); ++k) {
      const std::vector<float> h = tensor_to_f32(generator_->fetched(k));
      if (int64_t(h.size()) != int64_t(ids.size()) * layers_->hidden_size)
        fail(model_->io().layer_outputs[k], "has " + std::to_string(h.size()) + " values for " +
                                                std::to_string(ids.size()) + " tokens");
      layers_->streams[k].assign(h.begin(), h.end());
    }
  }
  std::vector<int64_t> greedy(std::span<const int64_t> prompt, int64_t new_tokens) override {
    generator_->reset();
    GenerateOptions o;
    o.max_new_tokens = new_tokens;
    return generate_greedy(*generator_, prompt, o).generated_ids;
  }
  const LayerStates* layers() const override { return layers_ ? &*layers_ : nullptr; }

 private:
  // Fetches hidden_states.0..N on every run; the layer types come from which
  // state each layer carries.
  void keep_layers(const fs::path& dir) {
    const ModelIo& io = model_->io();
    if (io.layer_outputs.empty())
      fail(dir.string(), "built without --layer-outputs (it has no hidden_states.N outputs); rebuild it with --layer-outputs");
    generator_->fetch_outputs(io.layer_outputs);
    layers_.emplace();
    const std::vector<int64_t> full = io.full_attention_layers();
    for (int64_t i = 0; i + 1 < int64_t(io.layer_outputs.size()); ++i)
      layers_->layer_types.push_back(std::count(full.begin(), full.end(), i) ? "full_attention" : "linear_attention");
    layers_->streams.resize(io.layer_outputs.size());
    Ort::TypeInfo type = model_->session().GetOutputTypeInfo(output_index(io.layer_outputs[0]));
    layers_->hidden_size = type.GetTensorTypeAndShapeInfo().GetShape().back();
    if (layers_->hidden_size <= 0) fail(dir.string(), "hidden_states.0 has no static hidden size");
  }
  size_t output_index(const std::string& name) const {
    const auto names = model_->session().GetOutputNames();
    return size_t(std::find(names.begin(), names.end(), name) - names.begin());
  }

  std::string name_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Generator> generator_;
  std::optional<LayerStates> layers_;
};

class ReferenceSource : public LogitSource {
 public:
  ReferenceSource(const fs::path& dir, bool layers)
      : name_("reference:" + model_label(dir)), ckpt_(Checkpoint::open(dir)), model_(*ckpt_), state_(model_.new_state()) {
    if (!layers) return;
    const ModelConfig& c = model_.config();
    layers_.emplace();
    layers_->hidden_size = c.hidden_size;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i)
      layers_->layer_types.push_back(c.is_full(i) ? "full_attention" : "linear_attention");
  }
  std::string name() const override { return name_; }
  int64_t vocab() const override { return model_.config().vocab_size; }
  int64_t context_length() const override { return model_.config().max_position_embeddings; }
  void reset() override { state_ = model_.new_state(); }
  void feed(std::span<const int64_t> ids, std::vector<double>& logits) override {
    ReferenceTrace trace;
    Matrix64 m = model_.forward(std::vector<int64_t>(ids.begin(), ids.end()), state_, layers_ ? &trace : nullptr);
    logits = std::move(m.data);
    if (!layers_) return;
    layers_->streams.clear();
    for (Matrix64& h : trace.hidden) layers_->streams.push_back(std::move(h.data));
  }
  std::vector<int64_t> greedy(std::span<const int64_t> prompt, int64_t new_tokens) override {
    return reference_greedy(model_, std::vector<int64_t>(prompt.begin(), prompt.end()), new_tokens).generated;
  }
  const LayerStates* layers() const override { return layers_ ? &*layers_ : nullptr; }

 private:
  std::string name_;
  std::unique_ptr<Checkpoint> ckpt_;
  ReferenceModel model_;
  ReferenceState state_;
  std::optional<LayerStates> layers_;
};

}  // namespace

std::unique_ptr<LogitSource> onnx_source(const fs::path& model_dir, int threads, int64_t max_length,
                                         KernelSet kernels, bool layers, std::optional<ExecutionProvider> ep) {
  return std::make_unique<OnnxSource>(model_dir, threads, max_length, kernels, layers, ep);
}

std::unique_ptr<LogitSource> reference_source(const fs::path& checkpoint_dir, bool layers) {
  return std::make_unique<ReferenceSource>(checkpoint_dir, layers);
}

// ---- metrics --------------------------------------------------------------------------

namespace {

// out = log_softmax(row), in double; returns the argmax (lowest index on ties).
int64_t log_softmax(const double* row, int64_t n, std::vector<double>& out) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  const double max = row[best];
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(row[i] - max);
  const double log_z = max + std::log(sum);
  out.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = row[i] - log_z;
  return best;
}

}  // namespace

void FidelityAccumulator::add(const double* a, const double* b, int64_t vocab, int64_t next) {
  const int64_t top_a = log_softmax(a, vocab, la_);
  const int64_t top_b = log_softmax(b, vocab, lb_);
  double kl = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const double pa = std::exp(la_[size_t(i)]);
    if (pa > 0) kl += pa * (la_[size_t(i)] - lb_[size_t(i)]);  // 0 * log 0 = 0
    const double d = b[i] - a[i];
    abs_diff_sum_ += std::abs(d);
    abs_diff_max_ = std::max(abs_diff_max_, std::abs(d));
    sq_diff_sum_ += d * d;
    sq_a_sum_ += a[i] * a[i];
  }
  logit_count_ += vocab;
  kl_.push_back(kl);
  if (top_a == top_b) ++top1_same_;
  nll_a_ -= la_[size_t(next)];
  nll_b_ -= lb_[size_t(next)];
  const double dp = std::exp(lb_[size_t(next)]) - std::exp(la_[size_t(next)]);
  dp_sq_ += dp * dp;
}

Fidelity FidelityAccumulator::result() const {
  Fidelity r;
  r.positions = int64_t(kl_.size());
  if (r.positions == 0) return r;
  std::vector<double> sorted = kl_;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double k : sorted) sum += k;
  const double n = double(r.positions);
  r.kl_mean = sum / n;
  r.kl_median = percentile_sorted(sorted, 50);
  r.kl_p99 = percentile_sorted(sorted, 99);
  r.kl_p999 = percentile_sorted(sorted, 99.9);
  r.kl_max = sorted.back();
  r.top1_same = top1_same_;
  r.top1_agreement = double(top1_same_) / n;
  r.max_abs_logit_diff = abs_diff_max_;
  r.mean_abs_logit_diff = abs_diff_sum_ / double(logit_count_);
  r.logits_nmse = sq_a_sum_ > 0 ? sq_diff_sum_ / sq_a_sum_ : 0;
  r.ppl_a = std::exp(nll_a_ / n);
  r.ppl_b = std::exp(nll_b_ / n);
  r.ppl_ratio = r.ppl_b / r.ppl_a;
  r.rms_dp = std::sqrt(dp_sq_ / n);
  return r;
}

std::vector<int64_t> CorpusSpec::load(int64_t vocab, const fs::path& tokenizer_dir, std::string* description) const {
  std::vector<int64_t> ids;
  std::string what;
  if (!ids_file.empty()) {
    ids = read_ids_file(ids_file);
    what = ids_file.filename().string() + " (ids)";
  } else if (!text_file.empty()) {
    ids = encode_text_file(text_file, tokenizer_dir);
    what = text_file.filename().string() + " (text)";
  } else {
    if (tokens < 2) fail("--tokens", "needs at least 2 tokens");
    ids = pseudo_random_ids(tokens, vocab, seed);
    what = "pseudo-random ids (seed " + std::to_string(seed) + ")";
  }
  if (limit > 0 && int64_t(ids.size()) > limit) ids.resize(size_t(limit));
  for (int64_t id : ids)
    if (id >= vocab) fail(what, "token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(vocab) + ")");
  if (description) *description = what;
  return ids;
}

int64_t feed_windows(LogitSource& a, LogitSource& b, std::span<const int64_t> corpus, const CompareOptions& o,
                     Progress& progress, const std::string& label, const OnChunk& on_chunk) {
  std::vector<double> logits_a, logits_b;
  const int64_t total = int64_t(corpus.size());
  int64_t windows = 0;
  for (int64_t start = 0; start + 1 < total; start += o.context) {
    const int64_t end = std::min(start + o.context, total);
    ++windows;
    a.reset();
    b.reset();
    for (int64_t c = start; c < end; c += o.chunk) {
      const int64_t n = std::min(o.chunk, end - c);
      progress.show(label + ": token " + std::to_string(c + n) + "/" + std::to_string(total));
      auto ids = corpus.subspan(size_t(c), size_t(n));
      a.feed(ids, logits_a);
      b.feed(ids, logits_b);
      on_chunk(end, c, n, logits_a, logits_b);
    }
  }
  return windows;
}

CompareReport compare_sources(LogitSource& a, LogitSource& b, std::span<const int64_t> corpus,
                              const CompareOptions& o) {
  validate(o);
  if (a.vocab() != b.vocab())
    fail("compare", "the vocabularies differ: " + a.name() + " has " + std::to_string(a.vocab()) + ", " + b.name() +
                        " has " + std::to_string(b.vocab()));
  if (corpus.size() < 2) fail("compare", "the corpus needs at least 2 tokens");
  const int64_t vocab = a.vocab();
  const double t_start = now_seconds();
  CompareReport r;
  r.a_name = a.name();
  r.b_name = b.name();
  r.options = o;
  r.corpus_tokens = int64_t(corpus.size());
  Progress progress(o.progress);

  FidelityAccumulator acc;
  const int64_t total = int64_t(corpus.size());
  auto score_chunk = [&](int64_t end, int64_t first, int64_t n, const std::vector<double>& la,
                         const std::vector<double>& lb) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = first + i;
      if (pos + 1 >= end) break;  // the last token of a window predicts nothing inside it
      acc.add(la.data() + i * vocab, lb.data() + i * vocab, vocab, corpus[size_t(pos + 1)]);
    }
  };
  r.windows = feed_windows(a, b, corpus, o, progress, "compare", score_chunk);
  r.fidelity = acc.result();

  if (o.greedy_tokens > 0) {
    r.greedy_prompt = std::min<int64_t>(o.greedy_prompt, total);
    r.greedy_tokens = o.greedy_tokens;
    for (const LogitSource* s : {&a, &b}) {
      const int64_t room = s->context_length() > 0 ? s->context_length() - r.greedy_prompt : r.greedy_tokens;
      r.greedy_tokens = std::min(r.greedy_tokens, room);
    }
    if (r.greedy_tokens > 0) {
      auto prompt = corpus.subspan(0, size_t(r.greedy_prompt));
      progress.show("compare: greedy continuation of " + std::to_string(r.greedy_tokens) + " tokens", true);
      const std::vector<int64_t> ga = a.greedy(prompt, r.greedy_tokens);
      const std::vector<int64_t> gb = b.greedy(prompt, r.greedy_tokens);
      while (r.greedy_agree < int64_t(std::min(ga.size(), gb.size())) && ga[size_t(r.greedy_agree)] == gb[size_t(r.greedy_agree)])
        ++r.greedy_agree;
    } else {
      r.greedy_tokens = 0;
    }
  }
  progress.done();
  r.seconds = now_seconds() - t_start;
  return r;
}

// ---- reports -----------------------------------------------------------------------------

namespace {

nlohmann::json fidelity_json(const Fidelity& f) {
  return {{"positions", f.positions},
          {"kl_mean", f.kl_mean},
          {"kl_median", f.kl_median},
          {"kl_p99", f.kl_p99},
          {"kl_p999", f.kl_p999},
          {"kl_max", f.kl_max},
          {"top1_same", f.top1_same},
          {"top1_agreement", f.top1_agreement},
          {"max_abs_logit_diff", f.max_abs_logit_diff},
          {"mean_abs_logit_diff", f.mean_abs_logit_diff},
          {"logits_nmse", f.logits_nmse},
          {"ppl_a", f.ppl_a},
          {"ppl_b", f.ppl_b},
          {"ppl_ratio", f.ppl_ratio},
          {"rms_dp", f.rms_dp}};
}

std::string greedy_text(const CompareReport& r) {
  if (r.greedy_tokens == 0) return "not run";
  return std::to_string(r.greedy_agree) + "/" + std::to_string(r.greedy_tokens);
}

}  // namespace

nlohmann::json to_json(const CompareReport& r) {
  return {{"a", r.a_name},
          {"b", r.b_name},
          {"a_is_reference", r.a_is_reference},
          {"corpus", r.corpus},
          {"corpus_tokens", r.corpus_tokens},
          {"windows", r.windows},
          {"context", r.options.context},
          {"chunk", r.options.chunk},
          {"threads", r.options.threads},
          {"fidelity", fidelity_json(r.fidelity)},
          {"greedy", {{"prompt_tokens", r.greedy_prompt}, {"tokens", r.greedy_tokens}, {"agree", r.greedy_agree}}},
          {"seconds", r.seconds}};
}

std::string to_markdown(const CompareReport& r) {
  const Fidelity& f = r.fidelity;
  std::string out;
  out += "B = " + r.b_name + " against A = " + r.a_name + ", teacher-forced over " + std::to_string(r.corpus_tokens) +
         " tokens of " + r.corpus + " in " + std::to_string(r.windows) + " window(s) of up to " +
         std::to_string(r.options.context) + ": " + std::to_string(f.positions) + " positions\n\n";
  out += "| metric | value |\n|---|---:|\n";
  out += "| mean KL(A‖B) | " + sci(f.kl_mean) + " |\n";
  out += "| median KL | " + sci(f.kl_median) + " |\n";
  out += "| 99% KL | " + sci(f.kl_p99) + " |\n";
  out += "| 99.9% KL | " + sci(f.kl_p999) + " |\n";
  out += "| max KL | " + sci(f.kl_max) + " |\n";
  out += "| same top-1 | " + fmt("%.3f %%", 100 * f.top1_agreement) + " (" + std::to_string(f.top1_same) + "/" +
         std::to_string(f.positions) + ") |\n";
  out += "| max \\|Δlogit\\| | " + sci(f.max_abs_logit_diff) + " |\n";
  out += "| mean \\|Δlogit\\| | " + sci(f.mean_abs_logit_diff) + " |\n";
  out += "| logits NMSE | " + sci(f.logits_nmse) + " |\n";
  out += "| RMS Δp | " + sci(f.rms_dp) + " |\n";
  out += "| PPL(A) | " + fmt("%.4f", f.ppl_a) + " |\n";
  out += "| PPL(B) | " + fmt("%.4f", f.ppl_b) + " |\n";
  out += "| PPL(B)/PPL(A) | " + fmt("%.6f", f.ppl_ratio) + " |\n";
  out += "| greedy agreement (tokens until the first difference, prompt " + std::to_string(r.greedy_prompt) + ") | " +
         greedy_text(r) + " |\n";
  return out;
}

// ---- the depth study ----------------------------------------------------------------------

namespace {

// A fresh folder under the system temp dir.
fs::path make_temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "deltagen-depth-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) fail(tmpl, "cannot create a temporary folder");
  return tmpl;
}

}  // namespace

std::vector<DepthRow> run_depth_study(const DepthStudyOptions& study, const CompareOptions& o, const CorpusSpec& corpus) {
  validate(o);
  if (study.depths.empty()) fail("--depth", "needs at least one layer count");
  BuildOptions build_a = study.build_a, build_b = study.build_b;
  const int64_t needed = std::max(o.context, o.greedy_prompt + o.greedy_tokens);
  for (BuildOptions* b : {&build_a, &build_b}) {
    // A rotary cache as long as the comparison needs, not the preset's 256k
    // positions: smaller, faster builds with identical logits.
    if (b->context_length == 0) b->context_length = needed;
    b->show_progress = o.progress;
  }
  const bool same_build = study.flags_a == study.flags_b;
  const ModelConfig base = synth_preset(study.preset);  // throws for an unknown preset

  if (study.keep && study.work_dir.empty()) fail("--keep", "needs --work-dir (where the files stay)");
  const bool own_work_dir = study.work_dir.empty();
  const fs::path work = own_work_dir ? make_temp_dir() : study.work_dir;
  fs::create_directories(work);
  Progress progress(o.progress);
  std::vector<DepthRow> rows;
  try {
    for (int64_t depth : study.depths) {
      ModelConfig cfg = base;
      set_num_layers(cfg, depth);
      const std::string name = study.preset + "-L" + std::to_string(cfg.num_hidden_layers);
      const fs::path dir = work / name;
      // Checkpoints in a work dir of the user's are kept and reused (the write
      // is atomic, so an existing folder is complete); they are named by
      // everything that determines them.
      const fs::path ckpt_dir = work / (name + "-seed" + std::to_string(study.seed) + "-checkpoint");
      if (!fs::exists(ckpt_dir / "config.json")) {
        progress.show("depth " + std::to_string(cfg.num_hidden_layers) + ": synthesizing", true);
        SynthOptions so;
        so.seed = study.seed;
        write_synthetic_checkpoint(cfg, so, ckpt_dir);
      }
      auto ckpt = Checkpoint::open(ckpt_dir);
      fs::remove_all(dir);  // models a kept earlier study left
      progress.show("depth " + std::to_string(cfg.num_hidden_layers) + ": building A", true);
      build_model(*ckpt, build_a, dir / "a");
      if (!same_build) {
        progress.show("depth " + std::to_string(cfg.num_hidden_layers) + ": building B", true);
        build_model(*ckpt, build_b, dir / "b");
      }
      ckpt.reset();
      progress.done();

      DepthRow row;
      row.layers = cfg.num_hidden_layers;
      const fs::path dir_b = dir / (same_build ? "a" : "b");
      row.nodes_a = graph_facts(dir / "a").node_count;
      row.nodes_b = graph_facts(dir_b).node_count;
      {
        auto a = onnx_source(dir / "a", o.threads, needed, KernelSet::Deltagen, false, o.ep_a);
        auto b = onnx_source(dir_b, o.threads, needed, KernelSet::Deltagen, false, o.ep_b);
        std::string what;
        std::vector<int64_t> ids = corpus.load(a->vocab(), dir / "a", &what);
        row.report = compare_sources(*a, *b, ids, o);
        row.report.corpus = what;
        row.report.a_name = study.flags_a.empty() ? "(default)" : study.flags_a;
        row.report.b_name = study.flags_b.empty() ? "(default)" : study.flags_b;
      }
      rows.push_back(std::move(row));
      if (!study.keep) fs::remove_all(dir);
      if (own_work_dir) fs::remove_all(ckpt_dir);
    }
  } catch (...) {
    if (own_work_dir) fs::remove_all(work);
    throw;
  }
  if (own_work_dir) fs::remove_all(work);
  return rows;
}

nlohmann::json to_json(const std::vector<DepthRow>& rows, const DepthStudyOptions& study) {
  nlohmann::json j;
  j["preset"] = study.preset;
  j["build_a"] = study.flags_a;
  j["build_b"] = study.flags_b;
  j["seed"] = study.seed;
  j["depths"] = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json d = to_json(r.report);
    d["layers"] = r.layers;
    d["nodes_a"] = r.nodes_a;
    d["nodes_b"] = r.nodes_b;
    j["depths"].push_back(d);
  }
  return j;
}

std::string to_markdown(const std::vector<DepthRow>& rows, const DepthStudyOptions& study) {
  std::string out;
  out += "Depth study, preset " + study.preset + ": A = `" + (study.flags_a.empty() ? "(default)" : study.flags_a) +
         "`, B = `" + (study.flags_b.empty() ? "(default)" : study.flags_b) + "`";
  if (!rows.empty()) {
    const CompareReport& r = rows[0].report;
    out += ", " + std::to_string(r.corpus_tokens) + " tokens of " + r.corpus + ", windows of " +
           std::to_string(r.options.context);
  }
  out += "\n\n| layers | nodes A | nodes B | mean KL | 99% KL | 99.9% KL | max KL | same top-1 | max \\|Δlogit\\| | "
         "mean \\|Δlogit\\| | PPL B/A | greedy agree |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& row : rows) {
    const Fidelity& f = row.report.fidelity;
    out += "| " + std::to_string(row.layers) + " | " + std::to_string(row.nodes_a) + " | " +
           std::to_string(row.nodes_b) + " | " + sci(f.kl_mean) + " | " + sci(f.kl_p99) + " | " + sci(f.kl_p999) +
           " | " + sci(f.kl_max) + " | " + fmt("%.2f %%", 100 * f.top1_agreement) + " | " +
           sci(f.max_abs_logit_diff) + " | " + sci(f.mean_abs_logit_diff) + " | " + fmt("%.6f", f.ppl_ratio) +
           " | " + greedy_text(row.report) + " |\n";
  }
  return out;
}

}  // namespace deltagen::measure
