// deltagen inspect --ep: reading ORT's profile (hand-made events), the names
// in ORT's "Force fallback" log lines, and the golden tiny-a fp32 model
// measured on the CPU EP and on WebGPU (skipped where no WebGPU adapter
// exists; scripts/setup_webgpu.sh installs lavapipe).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "measure/ep_placement.h"
#include "measure/ort_profile.h"
#include "runtime/execution_provider.h"
#include "runtime_fixtures.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

using measure::EpPlacement;
using nlohmann::json;

json node_event(const std::string& name, double ts, const std::string& op, const std::string& provider) {
  return {{"cat", "Node"},
          {"name", name + "_kernel_time"},
          {"ts", ts},
          {"dur", 1},
          {"args", {{"op_name", op}, {"provider", provider}, {"input_type_shape", json::array({{{"float16", {1, 64}}}})}}}};
}

TEST(OrtProfile, GroupsNodeAndDeviceEventsByRun) {
  const json events = json::array({
      {{"cat", "Session"}, {"name", "model_loading_uri"}, {"ts", 0}, {"dur", 50}},
      {{"cat", "Session"}, {"name", "model_run"}, {"ts", 100}, {"dur", 100}},
      {{"cat", "Session"}, {"name", "model_run"}, {"ts", 300}, {"dur", 100}},
      node_event("b", 150, "Add", "WebGpuExecutionProvider"),
      node_event("a", 110, "Gather", "WebGpuExecutionProvider"),  // written out of order: sorted by time
      {{"cat", "Node"}, {"name", "a_fence_before"}, {"ts", 111}, {"dur", 0}},  // not a kernel
      node_event("c", 310, "Shape", "CPUExecutionProvider"),
      node_event("loading", 10, "Cast", "CPUExecutionProvider"),  // outside every run
      {{"cat", "Api"}, {"name", "a&Gather&Gather"}, {"ts", 120}, {"dur", 1}},
      {{"cat", "Api"}, {"name", "b&Add&Add"}, {"ts", 160}, {"dur", 1}},
      {{"cat", "Api"}, {"name", "b&Add&Add"}, {"ts", 320}, {"dur", 1}},
  });
  const auto runs = measure::parse_ort_profile(events);
  ASSERT_EQ(runs.size(), 2u);
  ASSERT_EQ(runs[0].nodes.size(), 2u);
  EXPECT_EQ(runs[0].nodes[0].name, "a");
  EXPECT_EQ(runs[0].nodes[0].op, "Gather");
  EXPECT_EQ(runs[0].nodes[0].inputs, "float16[1,64]");
  EXPECT_EQ(runs[0].nodes[1].name, "b");
  EXPECT_EQ(runs[0].device_events, 2);
  ASSERT_EQ(runs[1].nodes.size(), 1u);
  EXPECT_EQ(runs[1].nodes[0].provider, "CPUExecutionProvider");
  EXPECT_EQ(runs[1].device_events, 1);
  EXPECT_THROW(measure::parse_ort_profile(json::object()), Error);
}

TEST(OrtProfile, ForcedCpuNodesAndTheirClassification) {
  const auto names = measure::forced_cpu_nodes(
      {"Some other line",
       "ORT optimization- Force fallback to CPU execution for node: /mask/Shape because the CPU execution path is "
       "deemed faster than overhead involved with execution on other EPs  capable of executing this node",
       "Force fallback to CPU execution for node: /mask/Cast"});
  ASSERT_EQ(names, (std::vector<std::string>{"/mask/Shape", "/mask/Cast"}));

  measure::ProfiledRun step;
  step.nodes = {{"/mask/Shape", "Shape", "CPUExecutionProvider", "", ""},
                {"/mask/Cast", "Cast", "CPUExecutionProvider", "", ""},
                {"/lm_head/FusedMatMul", "FusedMatMul", "CPUExecutionProvider", "float[1,1,64]", "float[1,1,512]"},
                {"/model/Add", "Add", "WebGpuExecutionProvider", "", ""}};
  step.device_events = 5;
  EpPlacement p;
  p.ep = ExecutionProvider::WebGpu;
  measure::count_decode_step(step, ExecutionProvider::WebGpu, names, p);
  EXPECT_EQ(p.node_runs, 4);
  EXPECT_EQ(p.runs_per_provider.at("CPUExecutionProvider"), 3);
  EXPECT_EQ(p.cpu_on_purpose, (std::map<std::string, int64_t>{{"Cast", 1}, {"Shape", 1}}));
  EXPECT_EQ(p.cpu_fallbacks, (std::map<std::string, int64_t>{{"FusedMatMul", 1}}));
  ASSERT_EQ(p.fallback_nodes.size(), 1u);
  EXPECT_EQ(p.dispatches(), 5);
}

int64_t sum(const std::map<std::string, int64_t>& counts) {
  int64_t n = 0;
  for (const auto& [k, v] : counts) n += v;
  return n;
}

TEST(EpPlacementGolden, CpuRunsEveryNodeOnTheCpu) {
  const EpPlacement p = measure::measure_ep_placement(test::golden_model_dir(), ExecutionProvider::Cpu, {.threads = 1});
  EXPECT_GT(p.graph_nodes, 0);
  EXPECT_GT(p.node_runs, 0);
  ASSERT_EQ(p.runs_per_provider.size(), 1u);
  EXPECT_EQ(p.runs_per_provider.begin()->first, "CPUExecutionProvider");
  EXPECT_EQ(p.dispatches(), p.node_runs);
  EXPECT_EQ(p.device_programs, -1);
  EXPECT_TRUE(p.cpu_on_purpose.empty());
  EXPECT_TRUE(p.cpu_fallbacks.empty());
  const json j = measure::placement_json(p);
  EXPECT_EQ(j.at("decode_step").at("node_runs"), p.node_runs);
}

TEST(EpPlacementGolden, WebGpuDispatchesAndPlacement) {
  EpPlacement p;
  try {
    p = measure::measure_ep_placement(test::golden_model_dir(), ExecutionProvider::WebGpu, {.threads = 1});
  } catch (const Error& e) {
    if (std::string(e.what()).starts_with("execution provider")) GTEST_SKIP() << e.what();
    throw;
  }
  EXPECT_GT(p.dispatches(), 0);
  int64_t runs = 0;
  for (const auto& [provider, n] : p.runs_per_provider) runs += n;
  EXPECT_EQ(runs, p.node_runs);
  EXPECT_GT(p.runs_per_provider.at("WebGpuExecutionProvider"), 0);
  // Every CPU node is either on purpose or a fallback.
  const auto cpu = p.runs_per_provider.find("CPUExecutionProvider");
  EXPECT_EQ(cpu == p.runs_per_provider.end() ? 0 : cpu->second, sum(p.cpu_on_purpose) + sum(p.cpu_fallbacks));
  // The attention mask's shape computations feed GroupQueryAttention's host inputs.
  EXPECT_GT(sum(p.cpu_on_purpose), 0);
  EXPECT_NE(measure::placement_text(p).find("dispatches per decode step"), std::string::npos);
}

}  // namespace
}  // namespace deltagen
