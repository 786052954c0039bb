#include "measure/ort_profile.h"

#include <stdlib.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "deltagen/error.h"

namespace deltagen::measure {
namespace {

using nlohmann::json;

constexpr std::string_view kKernelTime = "_kernel_time";

// [{"float16": [1, 8, 64]}, {"int64": []}] -> "float16[1,8,64], int64[]"
std::string type_shapes(const json& list) {
  std::string out;
  if (!list.is_array()) return out;
  for (const json& entry : list) {
    if (!entry.is_object()) continue;
    for (const auto& [dtype, shape] : entry.items()) {
      if (!out.empty()) out += ", ";
      out += dtype + "[";
      if (shape.is_array())
        for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + shape[i].dump();
      out += "]";
    }
  }
  return out;
}

std::string arg(const json& args, const char* key) {
  auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

std::vector<ProfiledRun> parse_ort_profile(const json& events) {
  if (!events.is_array()) fail("ONNX Runtime profile", "expected a JSON array of trace events");
  std::vector<ProfiledRun> runs;
  for (const json& e : events) {
    if (e.value("cat", "") != "Session" || e.value("name", "") != "model_run") continue;
    const double ts = e.value("ts", 0.0);
    runs.push_back({ts, ts + e.value("dur", 0.0), {}, 0});
  }
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
  auto run_at = [&](double ts) -> ProfiledRun* {
    auto it = std::upper_bound(runs.begin(), runs.end(), ts, [](double t, const auto& r) { return t < r.start_us; });
    if (it == runs.begin()) return nullptr;
    --it;
    return ts <= it->end_us ? &*it : nullptr;
  };

  // Events are written per thread, not in time order: sort each run's nodes by time.
  std::vector<std::vector<std::pair<double, ProfiledNode>>> timed(runs.size());
  for (const json& e : events) {
    const std::string cat = e.value("cat", "");
    if (cat == "Session" || !e.contains("ts")) continue;
    ProfiledRun* run = run_at(e.value("ts", 0.0));
    if (!run) continue;
    if (cat != "Node") {
      ++run->device_events;
      continue;
    }
    const std::string name = e.value("name", "");
    // Only the kernel itself: older versions also write "_fence_before"/"_fence_after".
    if (name.size() <= kKernelTime.size() || !name.ends_with(kKernelTime)) continue;
    const json& args = e.contains("args") ? e["args"] : json::object();
    ProfiledNode node{name.substr(0, name.size() - kKernelTime.size()), arg(args, "op_name"), arg(args, "provider"),
                      type_shapes(args.value("input_type_shape", json())),
                      type_shapes(args.value("output_type_shape", json())), e.value("dur", 0.0)};
    timed[size_t(run - runs.data())].emplace_back(e.value("ts", 0.0), std::move(node));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    std::stable_sort(timed[i].begin(), timed[i].end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [ts, node] : timed[i]) runs[i].nodes.push_back(std::move(node));
  }
  return runs;
}

ProfileFolder::ProfileFolder() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "deltagen-profile-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) fail(tmpl, "cannot create a temporary folder");
  path = tmpl;
}

ProfileFolder::~ProfileFolder() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::vector<ProfiledRun> read_ort_profile(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) fail(file.string(), "ONNX Runtime profile not found");
  json events = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (events.is_discarded()) fail(file.string(), "not a JSON ONNX Runtime profile");
  return parse_ort_profile(events);
}

}  // namespace deltagen::measure
