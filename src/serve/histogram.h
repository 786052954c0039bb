// A Prometheus histogram of seconds: fixed upper bounds chosen at start,
// a count per bucket, the sum and the count. The scheduler observes into it
// under its own lock; /metrics copies it out and writes the text
// (`_bucket{le=...}` cumulative, `_sum`, `_count`).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace deltagen::serve {

struct Histogram {
  std::vector<double> bounds;   // ascending upper bounds; +Inf is implied
  std::vector<int64_t> counts;  // per bucket, not cumulative: bounds.size() + 1 (the last is +Inf)
  double sum = 0;
  int64_t count = 0;

  Histogram() = default;
  explicit Histogram(std::vector<double> upper_bounds)
      : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

  void observe(double value) {
    if (counts.empty()) return;
    const size_t bucket = size_t(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
    ++counts[bucket];
    sum += value;
    ++count;
  }
};

// The bucket bounds the router-facing histograms use. They follow the
// ranges vLLM's own histograms cover (a few ms to minutes), so dashboards
// and pickers built for vLLM read deltagen's with the same resolution.
std::vector<double> time_to_first_token_buckets();
std::vector<double> inter_token_buckets();
std::vector<double> queue_time_buckets();

// Appends `# HELP`, `# TYPE name histogram` and the series of `h`.
// `labels` is the inside of the braces without them ("" for none), e.g.
// `model_name="m"`.
void append_histogram(std::string& out, const std::string& name, const std::string& help, const std::string& labels,
                      const Histogram& h);

}  // namespace deltagen::serve
