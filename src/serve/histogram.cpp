#include "serve/histogram.h"

#include <cstdio>

namespace deltagen::serve {

std::vector<double> time_to_first_token_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0};
}

std::vector<double> inter_token_buckets() {
  return {0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0};
}

std::vector<double> queue_time_buckets() {
  return {0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 240.0, 480.0};
}

namespace {

// A bound as written ("0.005", not 0.0050000000000000001); sums exactly.
std::string number(double v, const char* format = "%.17g") {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

}  // namespace

void append_histogram(std::string& out, const std::string& name, const std::string& help, const std::string& labels,
                      const Histogram& h) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  const std::string before = labels.empty() ? "" : labels + ",";
  int64_t cumulative = 0;
  for (size_t i = 0; i < h.counts.size(); ++i) {
    cumulative += h.counts[i];
    const std::string le = i < h.bounds.size() ? number(h.bounds[i], "%.10g") : "+Inf";
    out += name + "_bucket{" + before + "le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + braces + " " + number(h.sum) + "\n";
  out += name + "_count" + braces + " " + std::to_string(h.count) + "\n";
}

}  // namespace deltagen::serve
