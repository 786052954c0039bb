#include "measure/layer_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "measure/meters.h"
#include "measure/progress.h"
#include "util/number_text.h"
#include "deltagen/error.h"

namespace deltagen::measure {

void validate(const DivergenceRule& rule) {
  if (!(rule.jump_factor > 1)) fail("--jump-factor", "must be more than 1");
  if (!(rule.noise_floor > 0)) fail("--noise-floor", "must be positive");
  if (!(rule.rel_threshold >= rule.noise_floor)) fail("--rel-threshold", "must be at least the noise floor");
}

// ---- one row's differences --------------------------------------------------------------

void DiffAccumulator::add(const double* b, const double* a, int64_t n) {
  double dot = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::abs(b[i] - a[i]);
    max_abs_ = std::max(max_abs_, d);
    sum_abs_ += d;
    sq_diff_ += d * d;
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  sq_a_ += aa;
  // Two zero vectors point the same way; one zero vector points nowhere.
  const double cos = aa > 0 && bb > 0 ? dot / std::sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
  cos_sum_ += cos;
  cos_min_ = std::min(cos_min_, cos);
  elements_ += n;
  ++positions_;
}

DiffAccumulator::Result DiffAccumulator::result() const {
  Result r;
  r.positions = positions_;
  if (positions_ == 0) return r;
  r.max_abs_diff = max_abs_;
  r.mean_abs_diff = sum_abs_ / double(elements_);
  r.rel_error = sq_a_ > 0 ? std::sqrt(sq_diff_ / sq_a_) : sq_diff_ > 0 ? std::numeric_limits<double>::infinity() : 0;
  r.cos_mean = cos_sum_ / double(positions_);
  r.cos_min = cos_min_;
  return r;
}

// ---- the comparison ------------------------------------------------------------------------

namespace {

const LayerStates& layers_of(const LogitSource& s) {
  const LayerStates* l = s.layers();
  if (!l) fail(s.name(), "keeps no layer outputs (make the source with layers = true)");
  return *l;
}

std::vector<LayerRow> empty_rows(const LayerStates& l) {
  std::vector<LayerRow> rows;
  rows.push_back({"embeddings", "embeddings", "hidden_states.0", {}, 0});
  for (size_t i = 0; i < l.layer_types.size(); ++i)
    rows.push_back({"layer " + std::to_string(i), l.layer_types[i], "hidden_states." + std::to_string(i + 1), {}, 0});
  rows.push_back({"logits", "logits", "logits", {}, 0});
  return rows;
}

}  // namespace

LayerReport compare_layers(LogitSource& a, LogitSource& b, std::span<const int64_t> corpus, const CompareOptions& o,
                           const DivergenceRule& rule) {
  validate(o);
  validate(rule);
  const LayerStates &la = layers_of(a), &lb = layers_of(b);
  if (la.layer_types.size() != lb.layer_types.size() || la.hidden_size != lb.hidden_size)
    fail("compare --layers", a.name() + " has " + std::to_string(la.layer_types.size()) + " layers of width " +
                                 std::to_string(la.hidden_size) + ", " + b.name() + " has " +
                                 std::to_string(lb.layer_types.size()) + " of width " + std::to_string(lb.hidden_size));
  if (la.layer_types != lb.layer_types)
    fail("compare --layers", a.name() + " and " + b.name() + " have different layer types");
  if (a.vocab() != b.vocab())
    fail("compare --layers", "the vocabularies differ: " + a.name() + " has " + std::to_string(a.vocab()) + ", " +
                                 b.name() + " has " + std::to_string(b.vocab()));
  if (corpus.size() < 2) fail("compare", "the corpus needs at least 2 tokens");

  const double t_start = now_seconds();
  LayerReport r;
  r.a_name = a.name();
  r.b_name = b.name();
  r.options = o;
  r.rule = rule;
  r.corpus_tokens = int64_t(corpus.size());
  r.rows = empty_rows(la);
  std::vector<DiffAccumulator> acc(r.rows.size());
  Progress progress(o.progress);

  const int64_t H = la.hidden_size, V = a.vocab(), streams = int64_t(la.layer_types.size()) + 1;
  // feed() refreshes la and lb (the sources' residual streams) with the chunk's rows.
  auto diff_chunk = [&](int64_t, int64_t, int64_t n, const std::vector<double>& logits_a,
                        const std::vector<double>& logits_b) {
    for (int64_t k = 0; k < streams; ++k) {
      const std::vector<double>& ha = la.streams[size_t(k)], &hb = lb.streams[size_t(k)];
      for (int64_t t = 0; t < n; ++t) acc[size_t(k)].add(hb.data() + t * H, ha.data() + t * H, H);
    }
    for (int64_t t = 0; t < n; ++t) acc.back().add(logits_b.data() + t * V, logits_a.data() + t * V, V);
    r.positions += n;
  };
  r.windows = feed_windows(a, b, corpus, o, progress, "compare --layers", diff_chunk);
  for (size_t k = 0; k < r.rows.size(); ++k) r.rows[k].diff = acc[k].result();
  find_divergence(r);
  progress.done();
  r.seconds = now_seconds() - t_start;
  return r;
}

void find_divergence(LayerReport& r) {
  const DivergenceRule& rule = r.rule;
  r.first_divergent = -1;
  r.reason.clear();
  double previous = 0;  // the error before the embeddings: none
  for (size_t k = 0; k < r.rows.size(); ++k) {
    LayerRow& row = r.rows[k];
    const double rel = row.diff.rel_error;
    row.growth = rel / std::max(previous, rule.noise_floor);
    previous = rel;
    if (r.first_divergent >= 0 || !(rel >= rule.noise_floor)) continue;
    if (row.growth >= rule.jump_factor) {
      r.first_divergent = int64_t(k);
      r.reason = "jump";
    } else if (rel >= rule.rel_threshold) {
      r.first_divergent = int64_t(k);
      r.reason = "threshold";
    }
  }
}

// ---- reports -----------------------------------------------------------------------------------

namespace {

std::string fixed(double v, const char* f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// JSON has no infinity: a relative error over an all-zero baseline is null.
nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::string verdict(const LayerReport& r) {
  if (r.first_divergent < 0)
    return "No row diverges (relative error never grows " + fixed(r.rule.jump_factor, "%g") +
           "x over the row before nor reaches " + fixed(r.rule.rel_threshold, "%g") + ", above a noise floor of " +
           fixed(r.rule.noise_floor, "%g") + ").";
  const LayerRow& row = r.rows[size_t(r.first_divergent)];
  std::string what = row.name + (row.kind == row.name ? "" : " (" + row.kind + ")") + ", output " + row.output;
  if (r.reason == "jump")
    return "First divergence: " + what + ": relative error " + sci(row.diff.rel_error) + ", " +
           fixed(row.growth, "%.1f") + "x the row before (jump factor " + fixed(r.rule.jump_factor, "%g") + ").";
  return "First divergence: " + what + ": relative error " + sci(row.diff.rel_error) + " reaches the threshold " +
         fixed(r.rule.rel_threshold, "%g") + ".";
}

}  // namespace

nlohmann::json to_json(const LayerReport& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const LayerRow& row : r.rows)
    rows.push_back({{"name", row.name},
                    {"kind", row.kind},
                    {"output", row.output},
                    {"positions", row.diff.positions},
                    {"max_abs_diff", row.diff.max_abs_diff},
                    {"mean_abs_diff", row.diff.mean_abs_diff},
                    {"rel_error", number(row.diff.rel_error)},
                    {"cos_mean", row.diff.cos_mean},
                    {"cos_min", row.diff.cos_min},
                    {"growth", number(row.growth)}});
  nlohmann::json first;  // null when nothing diverges
  if (r.first_divergent >= 0) {
    const LayerRow& row = r.rows[size_t(r.first_divergent)];
    first = {{"row", r.first_divergent}, {"name", row.name}, {"output", row.output}, {"reason", r.reason}};
  }
  return {{"a", r.a_name},
          {"b", r.b_name},
          {"a_is_reference", r.a_is_reference},
          {"corpus", r.corpus},
          {"corpus_tokens", r.corpus_tokens},
          {"windows", r.windows},
          {"positions", r.positions},
          {"context", r.options.context},
          {"chunk", r.options.chunk},
          {"rule", {{"jump_factor", r.rule.jump_factor}, {"rel_threshold", r.rule.rel_threshold},
                    {"noise_floor", r.rule.noise_floor}}},
          {"layers", rows},
          {"first_divergence", first},
          {"seconds", r.seconds}};
}

std::string to_markdown(const LayerReport& r) {
  std::string out = "B = " + r.b_name + " against A = " + r.a_name + ", layer by layer, teacher-forced over " +
                    std::to_string(r.corpus_tokens) + " tokens of " + r.corpus + " in " + std::to_string(r.windows) +
                    " window(s) of up to " + std::to_string(r.options.context) + ": " + std::to_string(r.positions) +
                    " positions\n\n";
  out += "| row | kind | max \\|B-A\\| | mean \\|B-A\\| | rel. error | growth | cos mean | cos min |\n"
         "|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (size_t k = 0; k < r.rows.size(); ++k) {
    const LayerRow& row = r.rows[k];
    const bool first = int64_t(k) == r.first_divergent;
    out += "| " + row.name + (first ? " ← first" : "") + " | " + row.kind + " | " + sci(row.diff.max_abs_diff) + " | " +
           sci(row.diff.mean_abs_diff) + " | " + sci(row.diff.rel_error) + " | " + fixed(row.growth, "%.2f") + " | " +
           fixed(row.diff.cos_mean, "%.8f") + " | " + fixed(row.diff.cos_min, "%.8f") + " |\n";
  }
  return out + "\n" + verdict(r) + "\n";
}

}  // namespace deltagen::measure
