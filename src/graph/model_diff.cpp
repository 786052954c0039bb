#include "graph/model_diff.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <nlohmann/json.hpp>

namespace deltagen::graph {
namespace {

std::string signed_text(int64_t v) { return (v > 0 ? "+" : "") + std::to_string(v); }

std::string row(const std::string& label, const CountDelta& c) {
  char line[256];
  std::snprintf(line, sizeof line, "  %-52s %12" PRId64 " %12" PRId64 " %10s\n", label.c_str(), c.a, c.b,
                c.delta() ? signed_text(c.delta()).c_str() : "0");
  return line;
}

nlohmann::json delta_json(const CountDelta& c) { return {{"a", c.a}, {"b", c.b}, {"delta", c.delta()}}; }

}  // namespace

ModelDiff diff_models(const ModelSummary& a, const ModelSummary& b) {
  ModelDiff d;
  d.a = a;
  d.b = b;
  for (const auto& [op, n] : a.op_counts) d.op_counts[op].a = n;
  for (const auto& [op, n] : b.op_counts) d.op_counts[op].b = n;
  d.nodes = {a.node_count, b.node_count};
  d.weight_bytes = {a.weight_bytes(), b.weight_bytes()};
  d.initializers = {a.initializer_count, b.initializer_count};
  d.inputs = {int64_t(a.inputs.size()), int64_t(b.inputs.size())};
  d.outputs = {int64_t(a.outputs.size()), int64_t(b.outputs.size())};
  return d;
}

std::string diff_text(const ModelDiff& d) {
  std::string out = "A: " + d.a.file.string() + "\nB: " + d.b.file.string() + "\n";
  char head[256];
  std::snprintf(head, sizeof head, "  %-52s %12s %12s %10s\n", "", "A", "B", "B - A");
  out += head;
  out += row("nodes", d.nodes);
  std::vector<std::pair<std::string, CountDelta>> ops(d.op_counts.begin(), d.op_counts.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& x, const auto& y) {
    return std::llabs(x.second.delta()) > std::llabs(y.second.delta());
  });
  for (const auto& [op, c] : ops) out += row("  " + op, c);
  out += row("initializers", d.initializers);
  out += row("weight bytes", d.weight_bytes);
  out += row("graph inputs", d.inputs);
  out += row("graph outputs", d.outputs);
  return out;
}

nlohmann::json diff_json(const ModelDiff& d) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [op, c] : d.op_counts) ops[op] = delta_json(c);
  return {
      {"a", d.a.file.string()},
      {"b", d.b.file.string()},
      {"nodes", delta_json(d.nodes)},
      {"op_counts", ops},
      {"initializers", delta_json(d.initializers)},
      {"weight_bytes", delta_json(d.weight_bytes)},
      {"inputs", delta_json(d.inputs)},
      {"outputs", delta_json(d.outputs)},
  };
}

}  // namespace deltagen::graph
