// The constrained token choice (runtime/sampling.h: choose_allowed,
// Sampler::next with a predicate).
//
// Target: the distribution of next() on the logits with every disallowed id
// at -inf. Then top-k keeps the first k allowed ids in best-first order,
// top-p the shortest best-first prefix of allowed ids whose weight reaches p
// of the weight of the top-k survivors, min-p the allowed ids weighing at
// least min_p times the best allowed one, and the draw is u x (total weight
// kept) walked down the kept ids. The kept set is always "the first m allowed
// ids, best first", so only a prefix of the best-first order matters.
//
// Why a prefix of the walk settles it: after walking some ids best first, we
// know exactly the allowed ones among them and their cumulative weights C_i;
// the unwalked ids weigh at most R together (a bound: the sorted ones' exact
// weights, plus count x the last sorted weight for the unsorted rest, or
// their exact sum), and the allowed ones among them no more. So the cut m of
// each filter, and the kept total C_m, lie in intervals, and the id under u
// is the first i with C_i > u x C_m. When both ends of the intervals give the
// same i (and no cut can fall before it), that i is the answer whatever the
// unwalked ids are: the result is the same function of u as with the full
// mask, so it is an exact draw. Otherwise we walk on. Rejection sampling
// (draw unconstrained, retry if disallowed) would be exact only without
// top-k / top-p: those would have been cut on the unmasked ids.
//
// Weights are relative to the best allowed logit, exp((l - best) / T), the
// same numbers filter() computes on masked logits: no underflow when the model
// wanted something else by a wide margin.
#include <algorithm>
#include <cmath>
#include <limits>

#include "deltagen/error.h"
#include "runtime/sampling.h"

namespace deltagen {
namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

// ranks_before as a type of its own, so that the sorts inline it (a function
// pointer is an indirect call per comparison).
constexpr auto before = [](const Candidate& a, const Candidate& b) { return ranks_before(a, b); };

// The ids best first, sorted a chunk at a time (as keep_top_p does), each
// tested once: one by one first, then from the whole mask, with the refused
// ids dropped. Once a reference logit is set it keeps the summed weight of
// the sorted ids not walked yet.
class Walk {
 public:
  Walk(std::span<const float> logits, const TokenAllowed& allowed, const TokenMaskFill& fill_mask,
       ConstrainedScratch& s, size_t checks)
      : allowed_(allowed), fill_mask_(fill_mask), s_(s), c_(s.candidates), checks_left_(checks) {
    c_.resize(logits.size());
    for (size_t i = 0; i < logits.size(); ++i)  // NaN ranks last (argmax never picks it either)
      c_[i] = {int64_t(i), std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i], 0.0};
  }

  size_t size() const { return c_.size(); }
  size_t unwalked() const { return c_.size() - walked_; }
  bool only_allowed_left() const { return compacted_; }  // every unwalked id is allowed

  // The next id in best-first order, not yet walked; nullptr after the last.
  const Candidate* frontier() {
    if (walked_ == c_.size()) return nullptr;
    if (walked_ == sorted_) {
      const size_t upto = std::min(c_.size(), std::max<size_t>(64, sorted_ * 2));
      std::partial_sort(c_.begin() + ptrdiff_t(sorted_), c_.begin() + ptrdiff_t(upto), c_.end(), before);
      if (weighing_) {
        double chunk = 0;
        for (size_t i = sorted_; i < upto; ++i) chunk += c_[i].weight = weight(c_[i].logit);
        sorted_rest_ += chunk;
        tail_ -= chunk;
      }
      sorted_ = upto;
    }
    return &c_[walked_];
  }

  // Once only allowed ids are left (after the mask): the answer at once,
  // without sorting them. See settle_allowed.
  int64_t settle_rest(const SamplingOptions& o, size_t top_k, const std::vector<int64_t>& ids,
                      const std::vector<double>& cumulative, size_t heavy, double u);

  // Walks past the frontier (frontier() first): is its id allowed?
  bool step() {
    const Candidate& c = c_[walked_++];
    if (weighing_) sorted_rest_ -= c.weight;
    return test(c.id);
  }

  // From now on weights are exp((logit - reference) * inverse_temperature).
  void weigh(float reference, double inverse_temperature) {
    reference_ = reference;
    inverse_temperature_ = inverse_temperature;
    weighing_ = true;
    sorted_rest_ = 0;
    for (size_t i = walked_; i < sorted_; ++i) sorted_rest_ += c_[i].weight = weight(c_[i].logit);
    if (compacted_) exact_rest();  // only allowed ids left: their weight must be exact
  }
  double weight(float logit) const { return std::exp(double(logit - reference_) * inverse_temperature_); }
  double frontier_weight() const { return walked_ < c_.size() ? c_[walked_].weight : 0.0; }

  // An upper bound of the unwalked ids' summed weight (exact, up to rounding,
  // once exact_rest() was called).
  double rest_bound() const {
    const double tail = tail_exact_               ? tail_
                        : sorted_ == c_.size() ? 0.0
                                               : double(c_.size() - sorted_) * weight(c_[sorted_ - 1].logit);
    return std::max(0.0, sorted_rest_ + tail) * (1 + 1e-12);
  }
  void exact_rest() {
    tail_ = 0;
    for (size_t i = sorted_; i < c_.size(); ++i) tail_ += c_[i].weight = weight(c_[i].logit);
    tail_exact_ = true;
  }
  bool rest_is_exact() const { return tail_exact_; }

 private:
  bool test(int64_t id) {
    if (!have_mask_) {
      const bool probed_restrictive = tests_ >= kProbeChecks && allowed_seen_ * 4 < tests_ && fill_mask_;
      if (checks_left_ > 0 && !probed_restrictive) {
        --checks_left_;
        ++tests_;
        const bool ok = allowed_(id);
        allowed_seen_ += ok;
        return ok;
      }
      take_mask();
    }
    return s_.mask[size_t(id)] != 0;
  }

  // The whole mask; then the refused ids not walked yet are dropped (the
  // order of the others is kept, so the sorted prefix stays sorted).
  void take_mask() {
    s_.mask.assign(c_.size(), 0);
    if (fill_mask_) {
      fill_mask_(s_.mask);
    } else {
      for (size_t i = 0; i < c_.size(); ++i) s_.mask[i] = allowed_(int64_t(i));
    }
    have_mask_ = true;
    const auto kept = [&](const Candidate& c) { return s_.mask[size_t(c.id)] == 0; };
    const auto sorted_end = std::remove_if(c_.begin() + ptrdiff_t(walked_), c_.begin() + ptrdiff_t(sorted_), kept);
    const auto end = std::remove_if(c_.begin() + ptrdiff_t(sorted_), c_.end(), kept);
    const auto moved = std::move(c_.begin() + ptrdiff_t(sorted_), end, sorted_end);
    sorted_ = size_t(sorted_end - c_.begin());
    c_.erase(moved, c_.end());
    compacted_ = true;
    if (weighing_) {
      sorted_rest_ = 0;
      for (size_t i = walked_; i < sorted_; ++i) sorted_rest_ += c_[i].weight;
      exact_rest();
    }
  }

  const TokenAllowed& allowed_;
  const TokenMaskFill& fill_mask_;
  ConstrainedScratch& s_;
  std::vector<Candidate>& c_;
  size_t sorted_ = 0, walked_ = 0, checks_left_, tests_ = 0, allowed_seen_ = 0;
  bool have_mask_ = false, compacted_ = false, weighing_ = false, tail_exact_ = false;
  float reference_ = 0;
  double inverse_temperature_ = 1, sorted_rest_ = 0, tail_ = 0;
};

// The first i in [1, n] with C[i] >= x (or > x when `strictly`); kNone if none.
size_t first_reaching(const std::vector<double>& c, double x, bool strictly) {
  const auto it = strictly ? std::upper_bound(c.begin() + 1, c.end(), x) : std::lower_bound(c.begin() + 1, c.end(), x);
  return it == c.end() ? kNone : size_t(it - c.begin());
}

// What the walk knows so far, and whether it settles the draw.
struct Known {
  const SamplingOptions& o;
  size_t top_k;                  // kNone: off
  const std::vector<double>& c;  // c[i]: weight of the first i allowed ids (c[0] = 0)
  size_t heavy = 0;              // how many of them weigh >= min_p
  double frontier = 0;           // weight of the next unwalked id (the others weigh no more; 0: none left)
  double rest = 0;               // bound of the unwalked allowed ids' summed weight
  size_t rest_count = kNone;     // known: every unwalked id is allowed, this many, weighing `rest` exactly

  // [lo, hi] of the weight of the first m allowed ids (m = kNone: all of them).
  void mass(size_t m, double& lo, double& hi) const {
    const size_t n = c.size() - 1, all = rest_count == kNone ? kNone : n + rest_count;
    if (m <= n) {
      lo = hi = c[m];
    } else if (all != kNone && m >= all) {
      lo = hi = c[n] + rest;
    } else {
      lo = c[n];
      hi = c[n] + rest;
    }
  }

  // The index (1-based) of the chosen allowed id, or kNone if not settled.
  size_t settle(double u) const {
    const size_t n = c.size() - 1;
    // The top-k cut: min(k, number of allowed ids).
    size_t m_lo = n, m_hi = top_k;
    if (rest_count != kNone) {
      m_lo = m_hi = std::min(top_k, n + rest_count);
    } else if (top_k != kNone && n >= top_k) {
      m_lo = m_hi = top_k;
    }
    double lo, hi, unused;
    if (m_lo == m_hi) {
      mass(m_lo, lo, hi);
    } else {
      mass(m_lo, lo, unused);
      mass(m_hi, unused, hi);
    }
    if (o.top_p < 1.0) {  // the top-p cut, on the top-k survivors' weight
      const size_t p_lo = first_reaching(c, o.top_p * lo, false), p_hi = first_reaching(c, o.top_p * hi, false);
      m_lo = std::min(m_lo, p_lo == kNone ? n + 1 : p_lo);
      m_hi = std::min(m_hi, p_hi);
    }
    if (o.min_p > 0.0) {  // the best allowed id weighs 1: the threshold is min_p itself
      if (frontier < o.min_p) {
        m_lo = std::min(m_lo, heavy);
        m_hi = std::min(m_hi, heavy);
      } else {
        m_lo = std::min(m_lo, n);
      }
    }
    double total_lo, total_hi;  // the kept weight
    mass(m_lo, total_lo, unused);
    mass(m_hi, unused, total_hi);
    const size_t j_lo = first_reaching(c, u * total_lo, true), j_hi = first_reaching(c, u * total_hi, true);
    if (j_hi != kNone && j_lo == j_hi && j_hi <= m_lo) return j_hi;
    if (m_lo == m_hi && m_hi <= n) {  // all known, yet u x total unreached (rounding): the last id with weight, as next()
      size_t last = m_hi;
      while (last > 1 && c[last] == c[last - 1]) --last;
      return last;
    }
    return kNone;
  }
};

// The smallest k such that the k best of c[lo, hi) weigh >= need (> need
// when `strictly`), by quickselect on the weights rather than sorting (about
// 2n comparisons); leaves those k in c[lo, lo + k) (unordered).
// hi - lo if they never do (rounding).
size_t weighted_prefix(std::vector<Candidate>& c, size_t lo, size_t hi, double need, bool strictly) {
  const size_t start = lo;
  auto reached = [&](double sum) { return strictly ? sum > need : sum >= need; };
  while (hi - lo > 32) {
    // Pivot: the median of three, parked at the end, then placed between the
    // better and the worse ones (each round takes at least the pivot away).
    const size_t mid = lo + (hi - lo) / 2;
    if (before(c[mid], c[lo])) std::swap(c[mid], c[lo]);
    if (before(c[hi - 1], c[lo])) std::swap(c[hi - 1], c[lo]);
    if (before(c[mid], c[hi - 1])) std::swap(c[mid], c[hi - 1]);
    const Candidate pivot = c[hi - 1];
    const auto split_it = std::partition(c.begin() + ptrdiff_t(lo), c.begin() + ptrdiff_t(hi - 1),
                                         [&](const Candidate& x) { return before(x, pivot); });
    const size_t split = size_t(split_it - c.begin());
    std::swap(c[split], c[hi - 1]);
    double better = 0;
    for (size_t i = lo; i < split; ++i) better += c[i].weight;
    if (reached(better)) {
      hi = split;
    } else if (reached(better + pivot.weight)) {
      return split + 1 - start;
    } else {
      need -= better + pivot.weight;
      lo = split + 1;
    }
  }
  std::sort(c.begin() + ptrdiff_t(lo), c.begin() + ptrdiff_t(hi), before);
  double sum = 0;
  for (size_t i = lo; i < hi; ++i) {
    sum += c[i].weight;
    if (reached(sum)) return i + 1 - start;
  }
  return hi - start;
}

// Every unwalked id is allowed, with its weight: the walked allowed ids
// (ids, cumulative) come first in best-first order, then these, in any order.
// The same cuts and draw as Known::settle, with the weight of a best-first
// prefix of the rest found by selection instead of a walk.
int64_t Walk::settle_rest(const SamplingOptions& o, size_t top_k, const std::vector<int64_t>& ids,
                          const std::vector<double>& cumulative, size_t heavy, double u) {
  const size_t n = ids.size(), lo = walked_, r = c_.size() - walked_;
  const auto& c = cumulative;
  // The best t of the rest to the front, and their weight.
  auto best = [&](size_t t) {
    if (t < r) std::nth_element(c_.begin() + ptrdiff_t(lo), c_.begin() + ptrdiff_t(lo + t), c_.end(), before);
    double sum = 0;
    for (size_t i = lo; i < lo + t; ++i) sum += c_[i].weight;
    return sum;
  };
  const size_t m_k = std::min(top_k, n + r);
  const double w_k = m_k <= n ? c[m_k] : c[n] + best(m_k - n);
  size_t m = m_k;        // the kept ids: the first m allowed ones;
  double kept = w_k;     // their weight, when m > n (then the rest's part of them is in front)
  if (o.top_p < 1.0) {
    const double need = o.top_p * w_k;
    if (need <= c[n]) {
      m = first_reaching(c, need, false);
    } else {
      m = n + weighted_prefix(c_, lo, lo + (m_k - n), need - c[n], false);
      kept = c[n];
      for (size_t i = lo; i < lo + (m - n); ++i) kept += c_[i].weight;
    }
  }
  if (o.min_p > 0.0 && heavy == n && m > n) {  // some of the rest may weigh < min_p: those go
    const auto light = std::partition(c_.begin() + ptrdiff_t(lo), c_.begin() + ptrdiff_t(lo + (m - n)),
                                      [&](const Candidate& x) { return x.weight >= o.min_p; });
    m = n + size_t(light - (c_.begin() + ptrdiff_t(lo)));
    kept = c[n];
    for (size_t i = lo; i < lo + (m - n); ++i) kept += c_[i].weight;
  } else if (o.min_p > 0.0) {
    m = std::min(m, heavy);
  }
  if (m <= n) {  // the walked ids hold the kept set: Known::settle's draw
    const size_t j = first_reaching(c, u * c[m], true);
    if (j != kNone && j <= m) return ids[j - 1];
    size_t last = m;
    while (last > 1 && c[last] == c[last - 1]) --last;
    return ids[last - 1];
  }
  const double target = u * kept;
  const size_t j = first_reaching(c, target, true);
  if (j != kNone) return ids[j - 1];
  return c_[lo + weighted_prefix(c_, lo, lo + (m - n), target - c[n], true) - 1].id;
}

}  // namespace

int64_t choose_allowed(std::span<const float> logits, const SamplingOptions& o, double u, const TokenAllowed& allowed,
                       const TokenMaskFill& fill_mask, ConstrainedScratch& s, size_t checks) {
  validate_sampling(o);
  if (logits.empty()) fail("sampling", "no logits");
  if (o.greedy()) {  // usually the best id is allowed: one test
    const int64_t best = argmax(logits.data(), int64_t(logits.size()));
    if (!std::isnan(logits[size_t(best)]) && allowed(best)) return best;
  }
  Walk walk(logits, allowed, fill_mask, s, checks);
  Candidate first{-1, 0, 0};  // the best allowed id
  while (const Candidate* f = walk.frontier()) {
    const Candidate c = *f;
    if (walk.step()) {
      first = c;
      break;
    }
  }
  if (first.id < 0) fail("sampling", "no token is allowed");
  if (o.greedy() || std::isinf(first.logit)) return first.id;  // -inf: every allowed id has probability 0

  walk.weigh(first.logit, 1.0 / o.temperature);
  s.allowed.assign(1, first.id);
  s.cumulative.assign({0.0, 1.0});
  const size_t top_k = o.top_k > 0 && size_t(o.top_k) < walk.size() ? size_t(o.top_k) : kNone;
  Known known{o, top_k, s.cumulative, 1};
  for (;;) {
    const Candidate* f = walk.frontier();
    known.frontier = walk.frontier_weight();
    known.rest = walk.rest_bound();
    known.rest_count = walk.only_allowed_left() || !f ? walk.unwalked() : kNone;
    const size_t j = known.settle(u);
    if (j != kNone) return s.allowed[j - 1];
    if (!f) fail("sampling", "internal error: the constrained draw did not settle");
    if (!walk.rest_is_exact()) {  // the cheap bound was not enough: the exact sum, once
      walk.exact_rest();
      continue;
    }
    if (walk.only_allowed_left()) return walk.settle_rest(o, top_k, s.allowed, s.cumulative, known.heavy, u);
    const Candidate c = *f;
    if (walk.step()) {
      s.allowed.push_back(c.id);
      s.cumulative.push_back(s.cumulative.back() + c.weight);
      if (c.weight >= o.min_p) ++known.heavy;
    }
  }
}

int64_t Sampler::next(const float* logits, const TokenAllowed& allowed, const TokenMaskFill& fill_mask) {
  std::span<const float> row(logits, size_t(vocab_));
  if (penalties_active()) {
    std::copy(row.begin(), row.end(), scratch_.begin());
    penalize(scratch_);
    row = scratch_;
  }
  const double u = options_.greedy() ? 0.0 : uniform();
  const int64_t token = choose_allowed(row, options_, u, allowed, fill_mask, constrained_);
  note_in_context(token);
  ++generated_count_[size_t(token)];
  return token;
}

}  // namespace deltagen
