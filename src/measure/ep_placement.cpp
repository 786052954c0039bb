#include "measure/ep_placement.h"

#include <stdlib.h>

#include <algorithm>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "measure/graph_facts.h"
#include "runtime/execution_provider.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "deltagen/error.h"

namespace deltagen::measure {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string counts_text(const std::map<std::string, int64_t>& counts) {
  std::vector<std::pair<std::string, int64_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  for (const auto& [op, n] : sorted) out += (out.empty() ? "" : ", ") + op + " " + std::to_string(n);
  return out;
}

int64_t total(const std::map<std::string, int64_t>& counts) {
  int64_t n = 0;
  for (const auto& [op, c] : counts) n += c;
  return n;
}

// Every tensor the node reads and writes is an integer or bool ("int64[1,11],
// int64[1]"): shape and mask bookkeeping, not the model's arithmetic.
bool integer_only(const ProfiledNode& node) {
  const std::string all = node.inputs + ", " + node.outputs;
  size_t start = 0;
  while (start < all.size()) {
    const size_t bracket = all.find('[', start);
    if (bracket == std::string::npos) break;
    std::string dtype = all.substr(start, bracket - start);
    dtype.erase(0, dtype.find_first_not_of(", "));
    if (!dtype.starts_with("int") && !dtype.starts_with("uint") && dtype != "bool") return false;
    start = all.find(']', bracket);
    if (start == std::string::npos) break;
    ++start;
  }
  return !node.inputs.empty() || !node.outputs.empty();
}

}  // namespace

int64_t EpPlacement::dispatches() const {
  if (device_programs >= 0) return device_programs;
  auto it = runs_per_provider.find(ort_provider_name(ep));
  return it == runs_per_provider.end() ? 0 : it->second;
}

std::vector<std::string> forced_cpu_nodes(const std::vector<std::string>& ort_log) {
  static const std::string kMarker = "Force fallback to CPU execution for node: ";
  std::vector<std::string> names;
  for (const std::string& line : ort_log) {
    const size_t at = line.find(kMarker);
    if (at == std::string::npos) continue;
    std::string name = line.substr(at + kMarker.size());
    if (size_t end = name.find(" because"); end != std::string::npos) name.resize(end);
    names.push_back(name);
  }
  return names;
}

void count_decode_step(const ProfiledRun& step, ExecutionProvider ep, const std::vector<std::string>& forced_cpu,
                       EpPlacement& out) {
  const std::set<std::string> on_purpose(forced_cpu.begin(), forced_cpu.end());
  const std::string cpu = ort_provider_name(ExecutionProvider::Cpu);
  out.node_runs = int64_t(step.nodes.size());
  out.runs_per_provider.clear();
  out.cpu_on_purpose.clear();
  out.cpu_fallbacks.clear();
  out.fallback_nodes.clear();
  for (const ProfiledNode& node : step.nodes) {
    ++out.runs_per_provider[node.provider];
    // On the CPU EP every node is where it was meant to be.
    if (ep == ExecutionProvider::Cpu || node.provider != cpu) continue;
    if (on_purpose.count(node.name) || integer_only(node)) {
      ++out.cpu_on_purpose[node.op];
    } else {
      ++out.cpu_fallbacks[node.op];
      out.fallback_nodes.push_back(node);
    }
  }
  out.device_programs = ep == ExecutionProvider::Cpu || step.device_events == 0 ? -1 : step.device_events;
}

EpPlacement measure_ep_placement(const fs::path& model_dir, ExecutionProvider ep, const EpPlacementOptions& options) {
  if (options.prompt_tokens < 1 || options.decode_steps < 1)
    fail("inspect --ep", "needs at least one prompt token and one decode step");
  EpPlacement out;
  out.model = model_dir;
  out.ep = ep;
  out.graph_nodes = graph_facts(model_dir).node_count;
  out.prompt_tokens = options.prompt_tokens;
  out.decode_steps = options.decode_steps;

  ProfileFolder folder;  // removed however the measurement ends
  RuntimeOptions runtime{.intra_op_threads = options.threads, .ep = ep};
  runtime.profile_prefix = (folder.path / "ort").string();
  std::unique_ptr<Model> model;
  std::vector<std::string> forced_cpu;
  {
    OrtLogCapture log(ORT_LOGGING_LEVEL_INFO);
    model = Model::load(model_dir, runtime);
    forced_cpu = forced_cpu_nodes(log.messages());
  }

  std::vector<int64_t> prompt(size_t(options.prompt_tokens));
  const int64_t vocab = std::max<int64_t>(model->vocab_size(), 1);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int64_t(i + 1) % vocab;
  {
    Generator generator(*model, 1, options.prompt_tokens + options.decode_steps + 1);
    // One prefill run, then max_new_tokens - 1 decode steps.
    generate_greedy(generator, prompt, {.max_new_tokens = options.decode_steps + 1});
  }
  const std::string profile = model->end_profiling();
  const std::vector<ProfiledRun> runs = read_ort_profile(profile);
  if (int64_t(runs.size()) != 1 + options.decode_steps)
    fail(profile, "expected " + std::to_string(1 + options.decode_steps) + " runs in ONNX Runtime's profile, found " +
                      std::to_string(runs.size()));
  count_decode_step(runs.back(), ep, forced_cpu, out);
  return out;
}

std::string placement_text(const EpPlacement& p) {
  const std::string provider = ort_provider_name(p.ep);
  std::string out = "model: " + p.model.string() + "\n";
  out += "execution provider: " + std::string(execution_provider_name(p.ep)) + " (" + provider + ")\n";
  out += "graph nodes: " + std::to_string(p.graph_nodes) + " in the model file\n";
  out += "one decode step (prompt " + std::to_string(p.prompt_tokens) + " tokens, then " +
         std::to_string(p.decode_steps) + " decode steps; the last one counted): " + std::to_string(p.node_runs) +
         " node runs after ORT's fusions\n";
  for (const auto& [name, n] : p.runs_per_provider) out += "  " + name + ": " + std::to_string(n) + "\n";
  out += "dispatches per decode step: " + std::to_string(p.dispatches());
  out += p.device_programs >= 0 ? " (programs the EP's profiler recorded)\n" : " (node runs on the EP)\n";
  if (p.ep == ExecutionProvider::Cpu) return out;
  out += "on the CPU on purpose (shape computations): " + std::to_string(total(p.cpu_on_purpose));
  out += p.cpu_on_purpose.empty() ? "\n" : ": " + counts_text(p.cpu_on_purpose) + "\n";
  out += "fallbacks to the CPU (no " + provider + " kernel): " + std::to_string(total(p.cpu_fallbacks));
  out += p.cpu_fallbacks.empty() ? "\n" : ": " + counts_text(p.cpu_fallbacks) + "\n";
  for (const ProfiledNode& n : p.fallback_nodes)
    out += "  " + n.name + " (" + n.op + "): " + n.inputs + " -> " + n.outputs + "\n";
  return out;
}

json placement_json(const EpPlacement& p) {
  json fallbacks = json::array();
  for (const ProfiledNode& n : p.fallback_nodes)
    fallbacks.push_back({{"name", n.name}, {"op", n.op}, {"inputs", n.inputs}, {"outputs", n.outputs}});
  return {{"model", p.model.string()},
          {"ep", execution_provider_name(p.ep)},
          {"provider", ort_provider_name(p.ep)},
          {"graph_nodes", p.graph_nodes},
          {"prompt_tokens", p.prompt_tokens},
          {"decode_steps", p.decode_steps},
          {"decode_step",
           {{"node_runs", p.node_runs},
            {"runs_per_provider", p.runs_per_provider},
            {"dispatches", p.dispatches()},
            {"device_programs", p.device_programs >= 0 ? json(p.device_programs) : json(nullptr)}}},
          {"cpu_on_purpose", p.cpu_on_purpose},
          {"cpu_fallbacks", p.cpu_fallbacks},
          {"fallback_nodes", fallbacks}};
}

}  // namespace deltagen::measure
