#include "measure/time_profile.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

namespace deltagen::measure {
namespace {

std::vector<TimeShare> shares(const std::map<std::string, double>& us, double total_us, int64_t runs) {
  std::vector<TimeShare> out;
  for (const auto& [key, t] : us) out.push_back({key, t / 1e3 / double(runs), total_us > 0 ? t / total_us : 0});
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.ms_per_run > b.ms_per_run; });
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

std::string node_place(std::string_view name) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = std::min(name.find('/', start), name.size());
    if (slash > start) parts.emplace_back(name.substr(start, slash - start));
    start = slash + 1;
  }
  if (!parts.empty() && parts.front() == "model") parts.erase(parts.begin());
  if (parts.size() > 1) parts.pop_back();  // the node's own name: MatMul_Q4, GatedDeltaNet, ...
  std::string place;
  for (std::string& part : parts) {
    if (part.starts_with("layers.") && part.size() > 7 &&
        std::all_of(part.begin() + 7, part.end(), [](unsigned char c) { return std::isdigit(c); }))
      part = "layers.N";
    place += (place.empty() ? "" : "/") + part;
  }
  return place.empty() ? std::string(name) : place;
}

int64_t run_positions(const ProfiledRun& run) {
  for (const ProfiledNode& node : run.nodes) {
    if (node.name.find("embed_tokens") == std::string::npos) continue;
    const size_t at = node.inputs.find("int64[");
    if (at == std::string::npos) continue;
    const size_t end = node.inputs.find(']', at);
    const std::string dims = node.inputs.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
    const size_t comma = dims.rfind(',');
    try {
      return std::stoll(comma == std::string::npos ? dims : dims.substr(comma + 1));
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

std::vector<RunGroup> group_runs(const std::vector<ProfiledRun>& runs) {
  struct Acc {
    int64_t runs = 0;
    double run_us = 0, kernel_us = 0;
    std::map<std::string, double> place_us, op_us;
  };
  std::map<int64_t, Acc, std::greater<>> by_positions;
  for (const ProfiledRun& run : runs) {
    Acc& a = by_positions[run_positions(run)];
    ++a.runs;
    a.run_us += run.end_us - run.start_us;
    for (const ProfiledNode& node : run.nodes) {
      a.kernel_us += node.dur_us;
      a.place_us[node_place(node.name)] += node.dur_us;
      a.op_us[node.op.empty() ? "?" : node.op] += node.dur_us;
    }
  }
  std::vector<RunGroup> groups;
  for (const auto& [positions, a] : by_positions) {
    RunGroup g;
    g.positions = positions;
    g.runs = a.runs;
    g.run_ms = a.run_us / 1e3 / double(a.runs);
    g.kernel_ms = a.kernel_us / 1e3 / double(a.runs);
    g.by_place = shares(a.place_us, a.kernel_us, a.runs);
    g.by_op = shares(a.op_us, a.kernel_us, a.runs);
    groups.push_back(std::move(g));
  }
  return groups;
}

std::string time_profile_markdown(const std::vector<RunGroup>& groups, size_t top) {
  std::string out;
  for (const RunGroup& g : groups) {
    out += "\n### runs of " + (g.positions > 0 ? std::to_string(g.positions) : std::string("?")) + " position" +
           (g.positions == 1 ? "" : "s") + " per row: " + std::to_string(g.runs) + " run" + (g.runs == 1 ? "" : "s") +
           ", " + fmt("%.2f", g.run_ms) + " ms each (kernels " + fmt("%.2f", g.kernel_ms) + " ms)\n\n";
    auto table = [&](const char* what, const std::vector<TimeShare>& rows) {
      out += std::string("| ") + what + " | ms per run | share |\n|---|---:|---:|\n";
      for (size_t i = 0; i < rows.size() && i < top; ++i)
        out += "| " + rows[i].key + " | " + fmt("%.3f", rows[i].ms_per_run) + " | " + fmt("%.1f %%", 100 * rows[i].share) +
               " |\n";
      if (rows.size() > top) {
        double rest = 0, rest_share = 0;
        for (size_t i = top; i < rows.size(); ++i) rest += rows[i].ms_per_run, rest_share += rows[i].share;
        out += "| (" + std::to_string(rows.size() - top) + " more) | " + fmt("%.3f", rest) + " | " +
               fmt("%.1f %%", 100 * rest_share) + " |\n";
      }
      out += "\n";
    };
    table("place", g.by_place);
    table("op", g.by_op);
  }
  return out;
}

nlohmann::json time_profile_json(const std::vector<RunGroup>& groups) {
  nlohmann::json out = nlohmann::json::array();
  auto list = [](const std::vector<TimeShare>& rows) {
    nlohmann::json l = nlohmann::json::array();
    for (const TimeShare& r : rows) l.push_back({{"key", r.key}, {"ms_per_run", r.ms_per_run}, {"share", r.share}});
    return l;
  };
  for (const RunGroup& g : groups)
    out.push_back({{"positions", g.positions},
                   {"runs", g.runs},
                   {"run_ms", g.run_ms},
                   {"kernel_ms", g.kernel_ms},
                   {"by_place", list(g.by_place)},
                   {"by_op", list(g.by_op)}});
  return out;
}

}  // namespace deltagen::measure
