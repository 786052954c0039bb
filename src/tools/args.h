// Minimal flag parsing for the subcommands: "--name value" and "--switch".
// Unknown flags and missing values are Errors, so every command rejects typos.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "deltagen/options.h"
#include "runtime/kernel_options.h"

namespace deltagen {

class Args {
 public:
  // argv[0] is the subcommand; `switches` are the flags that take no value.
  Args(int argc, char** argv, std::set<std::string> switches = {});

  bool has(const std::string& flag);                      // marks flag as known
  std::optional<std::string> get(const std::string& flag);  // the last one given
  std::vector<std::string> get_all(const std::string& flag);  // every value of a repeatable flag, in order
  std::string require(const std::string& flag);
  std::string get_or(const std::string& flag, const std::string& fallback);
  int64_t get_int(const std::string& flag, int64_t fallback);
  double get_double(const std::string& flag, double fallback);
  // "5,17,300" -> {5, 17, 300}; throws Error on a malformed list.
  std::vector<int64_t> get_ids(const std::string& flag);
  bool flag(const std::string& name);                     // a switch
  const std::vector<std::string>& positional() const { return positional_; }

  // Throws Error for any flag that no get/has/flag call asked about.
  void finish();

  const std::string& command() const { return command_; }

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_values_;
  std::set<std::string> seen_switches_;
  std::vector<std::string> positional_;
  std::set<std::string> asked_;
};

std::vector<int64_t> parse_ids(const std::string& text, const std::string& what);

// --kernels-style flag: "deltagen" (the default: deltagen's kernels and the
// fused linear-attention layer swapped into ONNX Runtime), "deltagen-ops"
// (the per-op kernels only), "ort" (ORT's own); else Error.
KernelSet get_kernels_flag(Args& args, const std::string& flag);
// --ep-style flag: cpu, webgpu or cuda; absent = none (the model's own
// provider, from `build --target`, else the CPU); else Error.
std::optional<ExecutionProvider> get_ep_flag(Args& args, const std::string& flag);
// --kernels and --max-isa as KernelOptions (checked when the model loads).
KernelOptions get_kernel_flags(Args& args);

// --session-config-style flag: "KEY=VALUE[,KEY=VALUE...]" (ONNX Runtime session
// config entries); empty when the flag is absent, Error when malformed.
SessionConfig get_session_config_flag(Args& args, const std::string& flag);

}  // namespace deltagen
