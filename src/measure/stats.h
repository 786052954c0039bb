// Small statistics for measurements: summaries over runs (mean and spread)
// and percentiles over many samples (decode latencies, per-token KL).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace deltagen::measure {

// Mean and spread of a few repeated measurements (runs, pairs).
struct Summary {
  int64_t n = 0;
  double mean = 0, stddev = 0, min = 0, max = 0, median = 0;
  // The geometric mean: the right average for ratios (0 when a value is <= 0).
  double geomean = 0;
};

// stddev is the sample standard deviation (n - 1), 0 for n < 2. All fields
// are 0 for an empty input.
Summary summarize(std::span<const double> values);

// The p-th percentile (0..100) with linear interpolation between closest
// ranks (numpy's default), 0 for an empty input. Sorts a copy.
double percentile(std::span<const double> values, double p);
// The same on values already sorted ascending (no copy).
double percentile_sorted(std::span<const double> sorted, double p);

nlohmann::json to_json(const Summary& s);

}  // namespace deltagen::measure
