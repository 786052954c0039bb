#include "models/mixed_precision.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "deltagen/error.h"
#include "quant/parallel.h"

namespace deltagen {
namespace {

// Logits in float: hidden [T][H] times the logits weight [V][H] as float.
// Eight partial sums per dot product so the compiler vectorizes it.
std::vector<float> float_logits(const Matrix64& x, const std::vector<float>& w, int64_t vocab, int threads) {
  const int64_t T = x.rows, H = x.cols;
  std::vector<float> xf(x.data.begin(), x.data.end()), out(size_t(T * vocab));
  quant::parallel_for(vocab, threads, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t v = begin; v < end; ++v) {
      const float* wv = w.data() + v * H;
      for (int64_t t = 0; t < T; ++t) {
        const float* xt = xf.data() + t * H;
        float acc[8] = {};
        int64_t i = 0;
        for (; i + 8 <= H; i += 8)
          for (int l = 0; l < 8; ++l) acc[l] += xt[i + l] * wv[i + l];
        float s = 0;
        for (; i < H; ++i) s += xt[i] * wv[i];
        for (float a : acc) s += a;
        out[size_t(t * vocab + v)] = s;
      }
    }
  });
  return out;
}

void log_softmax_rows(std::vector<float>& logits, int64_t vocab) {
  for (size_t r = 0; r < logits.size() / size_t(vocab); ++r) {
    float* row = logits.data() + r * size_t(vocab);
    const float m = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(row[i] - m));
    const float lse = m + float(std::log(sum));
    for (int64_t i = 0; i < vocab; ++i) row[i] -= lse;
  }
}

// Mean over rows of KL(base || other), both log-probabilities.
double mean_kl(const std::vector<float>& base, const std::vector<float>& other, int64_t vocab) {
  const size_t rows = base.size() / size_t(vocab);
  double total = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* a = base.data() + r * size_t(vocab);
    const float* b = other.data() + r * size_t(vocab);
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i) kl += std::exp(double(a[i])) * (double(a[i]) - double(b[i]));
    total += std::max(kl, 0.0);
  }
  return total / double(rows);
}

int64_t layer_of(const std::string& weight) {
  if (weight.rfind("layers.", 0) != 0) return -1;
  return std::stoll(weight.substr(7, weight.find('.', 7) - 7));
}

int64_t stored_bytes(int64_t n, int64_t k, const quant::BlockFormat& f, int scale_bytes) {
  const int64_t blocks = f.blocks_per_row(k);
  return n * (f.packed_row_bytes(k) + blocks * scale_bytes + (f.symmetric ? 0 : f.zero_point_row_bytes(k)));
}

int64_t format_bytes(int64_t n, int64_t k, const WeightFormat& f, int scale_bytes) {
  if (f.quantized) return stored_bytes(n, k, f.block, scale_bytes);
  return n * k * (f.float_dtype == graph::kFloat ? 4 : 2);
}

// The embedding bytes the budget counts beside the head site in `head_format`:
// one row per token, or the whole table when the file stores it apart.
int64_t embedding_counted_bytes(const MixedPlanOptions& o, const WeightFormat& head_format) {
  if (o.embedding_rows == 0) return 0;
  const WeightFormat& f = o.embedding_format ? *o.embedding_format : head_format;
  if (o.budget_per_read) return format_bytes(1, o.embedding_cols, f, o.scale_bytes);
  return o.embedding_shared ? 0 : format_bytes(o.embedding_rows, o.embedding_cols, f, o.scale_bytes);
}

int64_t embedding_counted_weights(const MixedPlanOptions& o) {
  if (o.embedding_rows == 0) return 0;
  if (o.budget_per_read) return o.embedding_cols;
  return o.embedding_shared ? 0 : o.embedding_rows * o.embedding_cols;
}

struct Quantized {
  std::vector<float> values;  // dequantized [N][K]
  double weighted_error = 0;  // sum_c importance[c] (w - q)^2
};

Quantized quantize_weight(const Matrix64& w, const quant::BlockFormat& f, const MixedPlanOptions& o,
                          const quant::InputStats* stats) {
  std::vector<float> wf(w.data.begin(), w.data.end());
  quant::FitOptions fit{.method = o.method, .stats = stats, .scales = o.scales};
  if (o.method == quant::QuantMethod::Gptq && (!stats || !stats->full())) fit.method = quant::QuantMethod::Search;
  const quant::QuantizedMatrix q = quant::quantize_matrix(
      w.rows, w.cols, f, fit, [&](int64_t r, float* dst) { std::copy_n(&wf[size_t(r * w.cols)], w.cols, dst); },
      o.threads);
  Quantized out;
  const std::vector<double> importance = stats ? stats->importance() : std::vector<double>(size_t(w.cols), 1.0);
  out.weighted_error = quant::weighted_error(wf, q, importance);
  out.values = quant::dequantize_matrix(q);
  return out;
}

// The formats a site may take: int4 at the base block and coarser ones, int8.
std::vector<WeightFormat> candidate_formats(const quant::BlockFormat& base, int64_t min_k) {
  std::vector<WeightFormat> out;
  for (int64_t block = base.block_size; block <= 128; block *= 2) {
    if (block > base.block_size && min_k % block != 0) break;  // a gather needs whole blocks
    WeightFormat f;
    f.quantized = true;
    f.block = base;
    f.block.block_size = block;
    out.push_back(f);
  }
  WeightFormat int8 = out.front();
  int8.block.bits = 8;
  out.push_back(int8);
  return out;
}

}  // namespace

std::string format_label(const WeightFormat& f) {
  if (!f.quantized) return "float";
  return "int" + std::to_string(f.block.bits) + "/b" + std::to_string(f.block.block_size) +
         (f.block.symmetric ? "/sym" : "/asym");
}

MixedPlan plan_mixed_precision(ReferenceModel& model, const Calibration& cal, const std::vector<int64_t>& all_ids,
                               const MixedPlanOptions& o) {
  const ModelConfig& c = model.config();
  const int64_t vocab = c.vocab_size;
  const std::vector<int64_t> ids(all_ids.begin(), all_ids.begin() + std::min<int64_t>(o.eval_tokens, all_ids.size()));
  const bool show = o.progress && ::isatty(STDERR_FILENO);

  // Each site's formats and their bytes; a budget below the smallest plan
  // fails before anything is measured.
  MixedPlan plan;
  plan.budget_per_read = o.budget_per_read;
  int64_t params = embedding_counted_weights(o), min_bytes = 0;
  for (const CalibrationSite& site : cal.sites) {
    SitePlan sp;
    sp.weights = site.weights;
    const bool head = layer_of(site.weights.front()) < 0;
    int64_t min_k = INT64_MAX;
    for (const std::string& name : site.weights) {
      const Matrix64& w = model.linear_weight(name);
      sp.params += w.rows * w.cols;
      min_k = std::min(min_k, w.cols);
    }
    for (const WeightFormat& f : candidate_formats(o.base, min_k)) {
      SiteFormat sf;
      sf.format = f;
      for (const std::string& name : site.weights) {
        const Matrix64& w = model.linear_weight(name);
        sf.bytes += stored_bytes(w.rows, w.cols, f.block, o.scale_bytes);
      }
      // The embedding rides on the head site: its format may follow the head's.
      sf.counted_bytes = sf.bytes + (head ? embedding_counted_bytes(o, f) : 0);
      sp.candidates.push_back(sf);
    }
    int64_t smallest = INT64_MAX;
    for (const SiteFormat& f : sp.candidates) smallest = std::min(smallest, f.counted_bytes);
    params += sp.params;
    min_bytes += smallest;
    plan.sites.push_back(std::move(sp));
  }
  // A head site without one (an untied checkpoint's float-gathered table, say)
  // still leaves the embedding's fixed bytes to count.
  bool has_head = false;
  for (const SitePlan& sp : plan.sites) has_head |= layer_of(sp.weights.front()) < 0;
  const int64_t fixed_bytes = has_head || !o.embedding_format ? 0 : embedding_counted_bytes(o, *o.embedding_format);
  min_bytes += fixed_bytes;
  const double budget_bytes = o.bits_budget * double(params) / 8.0;
  if (double(min_bytes) > budget_bytes)
    fail("--bits-budget", "no plan fits " + std::to_string(o.bits_budget) + " bits per weight " +
                              (o.budget_per_read ? "read per token" : "of the file") + ": the smallest is " +
                              std::to_string(double(min_bytes) * 8.0 / double(params)));

  // The unquantized model: the residual stream entering each layer, and the
  // next-token log-probabilities.
  ReferenceTrace trace;
  Matrix64 h = model.embed(ids);
  trace.hidden.assign(1, h);
  {
    ReferenceState state = model.new_state();
    model.run_layers(0, h, state, &trace);
  }
  const Matrix64& head = model.logits_weight();
  std::vector<float> head_f(head.data.begin(), head.data.end());
  const Matrix64 final_normed = model.final_norm(h);
  std::vector<float> base = float_logits(final_normed, head_f, vocab, o.threads);
  log_softmax_rows(base, vocab);

  for (size_t s = 0; s < cal.sites.size(); ++s) {
    const CalibrationSite& site = cal.sites[s];
    SitePlan& sp = plan.sites[s];
    // Every candidate's reconstruction error by round-to-nearest (their
    // ratios scale the measured KL); the base format by the build's method
    // swapped into the model.
    std::vector<double> errors(sp.candidates.size(), 0.0);
    MixedPlanOptions rtn = o;
    rtn.method = quant::QuantMethod::Rtn;
    for (size_t f = 0; f < sp.candidates.size(); ++f)
      for (const std::string& name : site.weights)
        errors[f] += quantize_weight(model.linear_weight(name), sp.candidates[f].format.block, rtn, site.stats.get())
                         .weighted_error;
    std::vector<Matrix64> saved;
    for (const std::string& name : site.weights) {
      Matrix64& w = model.linear_weight(name);
      const Quantized q = quantize_weight(w, sp.candidates[0].format.block, o, site.stats.get());
      saved.push_back(w);
      std::copy(q.values.begin(), q.values.end(), w.data.begin());
    }

    // The base format's measured KL: rerun from the site's layer (the whole
    // model for a shared head table: the embedding changes too; a head of
    // its own changes the logits alone).
    const int64_t layer = layer_of(site.weights.front());
    std::vector<float> logits;
    if (layer < 0 && !o.embedding_shared) {
      const Matrix64& qhead = model.logits_weight();
      logits = float_logits(final_normed, std::vector<float>(qhead.data.begin(), qhead.data.end()), vocab, o.threads);
    } else {
      Matrix64 x = layer >= 0 ? trace.hidden[size_t(layer)] : model.embed(ids);
      ReferenceState state = model.new_state();
      model.run_layers(std::max<int64_t>(layer, 0), x, state);
      if (layer >= 0) {
        logits = float_logits(model.final_norm(x), head_f, vocab, o.threads);
      } else {
        const Matrix64& qhead = model.logits_weight();
        logits = float_logits(model.final_norm(x), std::vector<float>(qhead.data.begin(), qhead.data.end()), vocab,
                              o.threads);
      }
    }
    log_softmax_rows(logits, vocab);
    const double kl = mean_kl(base, logits, vocab);
    for (size_t i = 0; i < site.weights.size(); ++i) model.linear_weight(site.weights[i]) = std::move(saved[i]);
    for (size_t f = 0; f < sp.candidates.size(); ++f)
      sp.candidates[f].kl = errors[0] > 0 ? kl * errors[f] / errors[0] : 0.0;
    if (show) std::fprintf(stderr, "\rmeasuring sensitivity: %zu / %zu groups", s + 1, cal.sites.size());
  }
  if (show) std::fputc('\n', stderr);

  auto choose = [&](double lambda) {
    int64_t bytes = fixed_bytes;
    for (SitePlan& sp : plan.sites) {
      double best = INFINITY;
      for (size_t f = 0; f < sp.candidates.size(); ++f) {
        const double cost = sp.candidates[f].kl + lambda * double(sp.candidates[f].counted_bytes);
        if (cost < best ||
            (cost == best && sp.candidates[f].counted_bytes < sp.candidates[sp.chosen].counted_bytes)) {
          best = cost;
          sp.chosen = f;
        }
      }
      bytes += sp.candidates[sp.chosen].counted_bytes;
    }
    return bytes;
  };
  // The smallest lambda (least KL) whose plan fits: bisection on a log scale.
  double lo = 0, hi = 1e-12;
  while (double(choose(hi)) > budget_bytes) hi *= 4;
  if (double(choose(lo)) > budget_bytes) {
    for (int i = 0; i < 100; ++i) {
      const double mid = lo > 0 ? std::sqrt(lo * hi) : hi / 1e6;
      if (double(choose(mid)) > budget_bytes) lo = mid;
      else hi = mid;
      if (lo > 0 && hi / lo < 1.0001) break;
    }
    choose(hi);
  }
  // The Lagrangian's plan can leave budget unused (the choices are discrete):
  // spend it on the upgrades that remove the most KL per byte while they fit.
  int64_t bytes = fixed_bytes;
  for (const SitePlan& sp : plan.sites) bytes += sp.candidates[sp.chosen].counted_bytes;
  for (;;) {
    SitePlan* best_site = nullptr;
    size_t best_format = 0;
    double best_gain = 0;
    for (SitePlan& sp : plan.sites) {
      const SiteFormat& now = sp.candidates[sp.chosen];
      for (size_t f = 0; f < sp.candidates.size(); ++f) {
        const SiteFormat& c = sp.candidates[f];
        const int64_t extra = c.counted_bytes - now.counted_bytes;
        if (c.kl >= now.kl || double(bytes + extra) > budget_bytes) continue;
        const double gain = (now.kl - c.kl) / double(std::max<int64_t>(extra, 1));
        if (gain > best_gain) {
          best_gain = gain;
          best_site = &sp;
          best_format = f;
        }
      }
    }
    if (!best_site) break;
    bytes += best_site->candidates[best_format].counted_bytes - best_site->candidates[best_site->chosen].counted_bytes;
    best_site->chosen = best_format;
  }
  for (const SitePlan& sp : plan.sites) plan.predicted_kl += sp.candidates[sp.chosen].kl;
  plan.bits_per_weight = double(bytes) * 8.0 / double(params);
  return plan;
}

nlohmann::json to_json(const MixedPlan& plan) {
  nlohmann::json sites = nlohmann::json::array();
  // The sites given more bytes than the base format (int8), and fewer (coarser blocks).
  nlohmann::json promoted = nlohmann::json::array(), demoted = nlohmann::json::array();
  for (const SitePlan& sp : plan.sites) {
    nlohmann::json cands = nlohmann::json::array();
    for (const SiteFormat& f : sp.candidates)
      cands.push_back({{"format", format_label(f.format)}, {"bytes", f.bytes}, {"kl", f.kl}});
    const SiteFormat& chosen = sp.candidates[sp.chosen];
    sites.push_back({{"weights", sp.weights}, {"params", sp.params}, {"format", format_label(chosen.format)},
                     {"candidates", cands}});
    const nlohmann::json change = {{"weights", sp.weights}, {"format", format_label(chosen.format)}};
    if (chosen.bytes > sp.candidates[0].bytes) promoted.push_back(change);
    if (chosen.bytes < sp.candidates[0].bytes) demoted.push_back(change);
  }
  return {{"budget_of", plan.budget_per_read ? "read" : "file"},
          {"bits_per_weight", plan.bits_per_weight},
          {"predicted_kl", plan.predicted_kl},
          {"base", plan.sites.empty() ? "" : format_label(plan.sites.front().candidates.front().format)},
          {"promoted", promoted},
          {"demoted", demoted},
          {"sites", sites}};
}

}  // namespace deltagen
