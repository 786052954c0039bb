// Where a model's time goes (bench --profile), from ONNX Runtime's profile:
// runs grouped by the positions they ran per row (a prompt, a decode step, a
// speculative verify run), and each group's kernel time per run by place in
// the model (layers.N/linear_attn/in_proj, lm_head, ...) and by op type.
// The profiler adds its own cost to every node (~1 µs): the shares are what
// to read, the absolute times run a little high.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "measure/ort_profile.h"

namespace deltagen::measure {

struct TimeShare {
  std::string key;        // a place or an op type
  double ms_per_run = 0;  // its kernels' time, mean per run of the group
  double share = 0;       // of the group's kernel time, 0..1
};

struct RunGroup {
  int64_t positions = 0;  // per row; 0 when the profile does not tell
  int64_t runs = 0;
  double run_ms = 0;      // mean wall time of one run (model_run)
  double kernel_ms = 0;   // mean kernel time of one run (the sum of its nodes')
  std::vector<TimeShare> by_place, by_op;  // largest first
};

// "/model/layers.3/linear_attn/in_proj/MatMul_Q4" -> "layers.N/linear_attn/in_proj":
// layer numbers folded, the node's own last name component dropped.
std::string node_place(std::string_view node_name);
// The positions per row a run fed: the last dimension of the int64 ids the
// embedding node read; 0 when no such node ran (a model fed embeddings).
int64_t run_positions(const ProfiledRun& run);
// Groups in order of positions (most first).
std::vector<RunGroup> group_runs(const std::vector<ProfiledRun>& runs);

// A markdown section per group: its `top` places and op types.
std::string time_profile_markdown(const std::vector<RunGroup>& groups, size_t top = 12);
nlohmann::json time_profile_json(const std::vector<RunGroup>& groups);

}  // namespace deltagen::measure
