// Reading ONNX Runtime's profile (RuntimeOptions::profile_prefix or
// DELTAGEN_ORT_PROFILE: a JSON array of Chrome trace events) into what each
// run of the session did. The events used:
//   cat "Session", name "model_run": one per Run, [ts, ts + dur] in µs.
//   cat "Node", name "<node>_kernel_time": one per node run, with args.op_name,
//     args.provider and args.input_type_shape / output_type_shape
//     ([{"float16": [1, 8, 64]}, ...]).
//   Any other cat but "Session": an execution provider's own profiler. The
//     WebGPU EP writes one "Api" event per shader program it dispatched
//     (name "<node>&<op>&<program>", timed on the device but on the same
//     clock), so a node may account for zero (a Reshape is a view), one or
//     several (GroupQueryAttention: three) dispatches.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace deltagen::measure {

struct ProfiledNode {
  std::string name;      // the node's name in the session's graph (after ORT's own rewrites)
  std::string op;        // op type, e.g. "MatMulNBits"
  std::string provider;  // "CPUExecutionProvider", "WebGpuExecutionProvider", ...
  std::string inputs, outputs;  // "float16[1,1,64], int64[1]"
  double dur_us = 0;            // the kernel's time in this run
};

struct ProfiledRun {
  double start_us = 0, end_us = 0;
  std::vector<ProfiledNode> nodes;  // in the order they ran
  int64_t device_events = 0;        // events of the EP's own profiler inside this run
};

// A private temporary folder for a profile, removed however the measurement ends.
struct ProfileFolder {
  std::filesystem::path path;
  ProfileFolder();
  ~ProfileFolder();
  ProfileFolder(const ProfileFolder&) = delete;
  ProfileFolder& operator=(const ProfileFolder&) = delete;
};

// One entry per model_run, in order; node and device events are given to the
// run they fall in (events outside every run, e.g. while loading, are dropped).
std::vector<ProfiledRun> parse_ort_profile(const nlohmann::json& events);
// Throws Error when the file is missing or not a profile.
std::vector<ProfiledRun> read_ort_profile(const std::filesystem::path& file);

}  // namespace deltagen::measure
