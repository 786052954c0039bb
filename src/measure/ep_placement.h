// Where ONNX Runtime runs a model's nodes on an execution provider, and how
// many kernels it launches per decode step (`deltagen inspect MODEL --ep E`).
//
// Measured, not predicted: the model is loaded on the EP with ORT's profiler
// on, runs a short prompt and a few decode steps (batch 1), and the last
// decode step's profile is counted (ort_profile.h). Nodes on the CPU provider
// of a device session are one of two kinds:
//   on purpose  ORT's partitioner took a node the EP has a kernel for and put
//               it on the CPU because it only computes shapes or other small
//               integer inputs the EP's kernels read from host memory (here:
//               the attention mask's ReduceSum/Shape/Gather/Cast that feed
//               GroupQueryAttention's seqlens_k and total_sequence_length).
//               Told apart two ways: ORT names such a node in an INFO log
//               line "Force fallback to CPU execution for node: NAME" while the
//               session loads (the WARNING "ORT explicitly assigns shape
//               related ops to CPU" summarizes them; the load runs under an
//               OrtLogCapture to read the names), and, since with ORT 1.30's
//               WebGPU EP that log names none of them (measured on tiny-a: the
//               int64 mask ops land on the CPU anyway), a CPU node whose inputs and
//               outputs (profile args) are all integer tensors counts too:
//               host-side bookkeeping that costs no device dispatch or copy of
//               activations.
//   fallback    every other CPU node: the EP has no kernel for that op and
//               dtype, so the data goes to the host and back. Casts ORT
//               inserts around a fallback node whose dtype the CPU lacks
//               ("InsertedPrecisionFreeCast_...") count here too.
// A fallback in a default build for the EP's target is a bug in the builder.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "deltagen/options.h"
#include "measure/ort_profile.h"

namespace deltagen::measure {

struct EpPlacementOptions {
  int64_t prompt_tokens = 8;
  int64_t decode_steps = 3;  // the last one is reported: the first may still be warming up
  int threads = 0;           // intra-op threads of the CPU provider (0 = ORT's default)
};

struct EpPlacement {
  std::filesystem::path model;
  ExecutionProvider ep = ExecutionProvider::Cpu;
  int64_t graph_nodes = 0;  // nodes in the model file, before ORT's own fusions
  int64_t prompt_tokens = 0, decode_steps = 0;
  // One decode step: every node run (ORT's graph, after its fusions), and how
  // many ran on each provider.
  int64_t node_runs = 0;
  std::map<std::string, int64_t> runs_per_provider;
  // Dispatches the EP's own profiler recorded in the step (WebGPU: shader
  // programs); -1 when it records none (the CPU EP; CUDA without CUPTI).
  int64_t device_programs = -1;
  std::map<std::string, int64_t> cpu_on_purpose;  // op type -> node runs (see above)
  std::map<std::string, int64_t> cpu_fallbacks;   // op type -> node runs
  std::vector<ProfiledNode> fallback_nodes;        // each fallback run, with its dtypes

  // Kernels launched on the EP per decode step: the EP profiler's count when
  // it has one, else the node runs on the EP. A node run is a lower bound on
  // what the device does (one node may launch several kernels, a view none).
  int64_t dispatches() const;
};

// Throws Error when the model or the EP cannot be loaded.
EpPlacement measure_ep_placement(const std::filesystem::path& model_dir, ExecutionProvider ep,
                                 const EpPlacementOptions& options = {});

// The names in ORT's "Force fallback to CPU execution for node: NAME ..." log lines.
std::vector<std::string> forced_cpu_nodes(const std::vector<std::string>& ort_log);

// The decode step counted from a parsed profile (exposed for the tests):
// fills node_runs .. fallback_nodes of `out`.
void count_decode_step(const ProfiledRun& step, ExecutionProvider ep, const std::vector<std::string>& forced_cpu,
                       EpPlacement& out);

std::string placement_text(const EpPlacement& p);
nlohmann::json placement_json(const EpPlacement& p);

}  // namespace deltagen::measure
