#include "measure/stats.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace deltagen::measure {

Summary summarize(std::span<const double> values) {
  Summary s;
  s.n = int64_t(values.size());
  if (values.empty()) return s;
  double sum = 0, log_sum = 0;
  bool all_positive = true;
  s.min = s.max = values[0];
  for (double v : values) {
    sum += v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
    if (v > 0) log_sum += std::log(v);
    else all_positive = false;
  }
  s.mean = sum / double(s.n);
  if (s.n > 1) {
    double sq = 0;
    for (double v : values) sq += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(sq / double(s.n - 1));
  }
  s.median = percentile(values, 50);
  s.geomean = all_positive ? std::exp(log_sum / double(s.n)) : 0;
  return s;
}

double percentile_sorted(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(sorted.size() - 1);
  const size_t lo = size_t(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - double(lo));
}

double percentile(std::span<const double> values, double p) {
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  return percentile_sorted(sorted, p);
}

nlohmann::json to_json(const Summary& s) {
  return {{"n", s.n},           {"mean", s.mean},     {"stddev", s.stddev}, {"min", s.min},
          {"max", s.max},       {"median", s.median}, {"geomean", s.geomean}};
}

}  // namespace deltagen::measure
