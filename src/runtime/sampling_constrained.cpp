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
// every unwalked id weighs at most the frontier's weight, and all of them
// together at most R (their summed weight: the allowed ones among them weigh
// less or the same). So each of k's, p's and min-p's cut m, and the total
// C_m, lies in an interval, and the id under u is the first i with C_i >
// u x C_m. When both ends of the interval give the same i (and the cut cannot
// fall before it), that i is the answer whatever the unwalked ids are: the
// result is the same function of u as with the full mask, so it is an exact
// draw. Otherwise we walk on. Rejection sampling (draw unconstrained, retry
// if disallowed) would be exact only without top-k / top-p: those would have
// been cut on the unmasked ids.
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

// The ids best first, sorted a chunk at a time (as keep_top_p does), each
// tested once: one by one while `checks` last, then from the whole mask.
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
  size_t walked() const { return walked_; }
  bool have_mask() const { return have_mask_; }

  // The next id in best-first order, not yet walked; nullptr after the last.
  const Candidate* frontier() {
    if (walked_ == c_.size()) return nullptr;
    if (walked_ == sorted_) {
      const size_t upto = std::min(c_.size(), std::max<size_t>(64, sorted_ * 2));
      std::partial_sort(c_.begin() + ptrdiff_t(sorted_), c_.begin() + ptrdiff_t(upto), c_.end(), ranks_before);
      sorted_ = upto;
    }
    return &c_[walked_];
  }

  // Walks past the frontier: is its id allowed?
  bool step() { return test(c_[walked_++].id); }

  // The summed weight of the ids not walked yet.
  double rest_weight(float reference, double inverse_temperature) const {
    double sum = 0;
    for (size_t i = walked_; i < c_.size(); ++i) sum += std::exp(double(c_[i].logit - reference) * inverse_temperature);
    return sum;
  }

  // Greedy, once the mask is known: the best allowed id not walked yet.
  int64_t best_in_mask() const {
    const Candidate* best = nullptr;
    for (size_t i = walked_; i < c_.size(); ++i)
      if (s_.mask[size_t(c_[i].id)] && (!best || ranks_before(c_[i], *best))) best = &c_[i];
    if (!best) fail("sampling", "no token is allowed");
    return best->id;
  }

 private:
  bool test(int64_t id) {
    if (!have_mask_) {
      if (checks_left_ > 0) {
        --checks_left_;
        return allowed_(id);
      }
      s_.mask.assign(c_.size(), 0);
      if (fill_mask_) {
        fill_mask_(s_.mask);
      } else {
        for (size_t i = 0; i < c_.size(); ++i) s_.mask[i] = allowed_(int64_t(i));
      }
      have_mask_ = true;
    }
    return s_.mask[size_t(id)] != 0;
  }

  const TokenAllowed& allowed_;
  const TokenMaskFill& fill_mask_;
  ConstrainedScratch& s_;
  std::vector<Candidate>& c_;
  size_t sorted_ = 0, walked_ = 0, checks_left_;
  bool have_mask_ = false;
};

// The first i in [1, n] with C[i] >= x (or > x when `strictly`); kNone if none.
size_t first_reaching(const std::vector<double>& c, double x, bool strictly) {
  const auto it = strictly ? std::upper_bound(c.begin() + 1, c.end(), x) : std::lower_bound(c.begin() + 1, c.end(), x);
  return it == c.end() ? kNone : size_t(it - c.begin());
}

// What the walk knows so far, and whether it settles the draw.
struct Known {
  const SamplingOptions& o;
  size_t top_k;                   // kNone: off
  const std::vector<double>& c;   // c[i]: weight of the first i allowed ids (c[0] = 0)
  size_t heavy = 0;               // how many of them weigh >= min_p
  bool exhausted = false;         // every id walked
  double frontier = 0;            // weight of the next unwalked id (all others weigh no more)
  double rest = 0;                // upper bound of the unwalked ids' summed weight

  // The index (1-based) of the chosen allowed id, or kNone if not settled.
  size_t settle(double u) const {
    const size_t n = c.size() - 1;
    size_t k_lo = n, k_hi = top_k;  // the top-k cut: min(k, allowed ids)
    if (top_k != kNone && n >= top_k) k_lo = k_hi = top_k;
    if (exhausted) k_lo = k_hi = std::min(n, top_k);
    size_t p_lo = kNone, p_hi = kNone;  // the top-p cut, on the top-k survivors' weight
    if (o.top_p < 1.0) {
      const double w_lo = c[k_lo], w_hi = k_hi <= n ? c[k_hi] : c[n] + rest;
      p_lo = first_reaching(c, o.top_p * w_lo, false);
      p_hi = first_reaching(c, o.top_p * w_hi, false);
    }
    size_t m_lo = std::min(k_lo, p_lo), m_hi = std::min(k_hi, p_hi);
    if (o.min_p > 0.0) {  // the best allowed id weighs 1: the threshold is min_p itself
      const bool known = exhausted || frontier < o.min_p;
      m_lo = std::min(m_lo, known ? heavy : n);
      if (known) m_hi = std::min(m_hi, heavy);
    }
    if (m_lo == m_hi && m_hi <= n) {  // the cut is known: so is the total
      const size_t j = first_reaching(c, u * c[m_hi], true);
      if (j != kNone && j <= m_hi) return j;
      size_t last = m_hi;  // rounding left u x total unreached: the last id with weight, as next() does
      while (last > 1 && c[last] == c[last - 1]) --last;
      return last;
    }
    const double total_lo = c[std::min(m_lo, n)], total_hi = m_hi <= n ? c[m_hi] : c[n] + rest;
    const size_t j_lo = first_reaching(c, u * total_lo, true), j_hi = first_reaching(c, u * total_hi, true);
    return j_hi != kNone && j_lo == j_hi && j_hi <= m_lo ? j_hi : kNone;
  }
};

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
  float reference = 0;  // the best allowed logit
  int64_t first = -1;
  while (const Candidate* f = walk.frontier()) {
    if (o.greedy() && walk.have_mask()) return walk.best_in_mask();
    const Candidate c = *f;
    if (walk.step()) {
      first = c.id;
      reference = c.logit;
      break;
    }
  }
  if (first < 0) fail("sampling", "no token is allowed");
  if (o.greedy() || std::isinf(reference)) return first;  // -inf: every allowed id has probability 0

  const double inverse_temperature = 1.0 / o.temperature;
  s.allowed.assign(1, first);
  s.cumulative.assign({0.0, 1.0});
  const size_t top_k = o.top_k > 0 && size_t(o.top_k) < walk.size() ? size_t(o.top_k) : kNone;
  Known known{o, top_k, s.cumulative, 1};
  double rest = -1, rest_at_start = 0;  // the exact unwalked weight, once computed (-1: not yet)
  for (;;) {
    const Candidate* f = walk.frontier();
    known.exhausted = f == nullptr;
    known.frontier = f ? std::exp(double(f->logit - reference) * inverse_temperature) : 0.0;
    // Cheap bound first (count x frontier weight); the exact sum only if that does not settle it.
    known.rest = !f          ? 0.0
                 : rest >= 0 ? std::max(rest, 0.0) + rest_at_start * 1e-9
                             : double(walk.size() - walk.walked()) * known.frontier;
    const size_t j = known.settle(u);
    if (j != kNone) return s.allowed[j - 1];
    if (!f) fail("sampling", "internal error: the constrained draw did not settle");
    if (rest < 0) {
      rest = rest_at_start = walk.rest_weight(reference, inverse_temperature);
      continue;
    }
    const Candidate c = *f;
    const double weight = known.frontier;
    rest -= weight;
    if (walk.step()) {
      s.allowed.push_back(c.id);
      s.cumulative.push_back(s.cumulative.back() + weight);
      if (weight >= o.min_p) ++known.heavy;
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
