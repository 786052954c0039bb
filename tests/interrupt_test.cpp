// Interrupting `deltagen build` (docs/reliability.md): a build killed by
// SIGINT (Ctrl-C) or SIGKILL while it writes weights leaves nothing that
// looks like a complete model folder (only a hidden ".<name>.partial-*"
// folder, obviously incomplete), an older complete output stays intact, and
// running the build again works and removes what the killed runs left.
//
// The checkpoint has the real 0.8B shapes (a 248k x 1024 embedding) over two
// layers: its fp32 build writes ~1.2 GB and takes a second or more, long
// enough to be caught mid-write.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "graph/model_summary.h"
#include "runtime/genai_config.h"
#include "synth/synth.h"
#include "test_util.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::run_cli;
using test::TempDir;
using Clock = std::chrono::steady_clock;

// The checkpoint, written directly: config.json of the preset and a
// safetensors file whose header lists every tensor and whose data is a hole
// (a sparse file of zeros), so making it costs nothing while the build still
// converts and writes ~1.2 GB.
const fs::path& checkpoint() {
  static TempDir dir;
  static const fs::path ck = [] {
    fs::path p = dir / "ck";
    fs::create_directories(p);
    ModelConfig cfg = synth_preset("0.8b");
    set_num_layers(cfg, 2);
    cfg.model_type = "qwen3_5_text";
    std::ofstream(p / "config.json") << config_to_json(cfg, false).dump(2);
    nlohmann::json header = nlohmann::json::object();
    uint64_t offset = 0;
    for (const auto& spec : qwen35_tensor_specs(cfg)) {
      uint64_t bytes = 2;
      for (int64_t d : spec.shape) bytes *= uint64_t(d);
      header[spec.name] = {{"dtype", "BF16"}, {"shape", spec.shape}, {"data_offsets", {offset, offset + bytes}}};
      offset += bytes;
    }
    const std::string h = header.dump();
    const uint64_t len = h.size();
    {
      std::ofstream out(p / "model.safetensors", std::ios::binary);
      out.write(reinterpret_cast<const char*>(&len), 8);
      out << h;
    }
    fs::resize_file(p / "model.safetensors", 8 + len + offset);
    return p;
  }();
  return ck;
}

// Starts `deltagen build --checkpoint CK --out out` without waiting.
pid_t start_build(const fs::path& out) {
  const std::string cli = DELTAGEN_CLI, ck = checkpoint().string(), o = out.string();
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(cli.c_str(), cli.c_str(), "build", "--checkpoint", ck.c_str(), "--out", o.c_str(), "--precision", "fp32",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Bytes written so far into the build's temp folder(s) next to `out`.
uintmax_t partial_bytes(const fs::path& out) {
  uintmax_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out.parent_path(), ec)) {
    if (e.path().filename().string().rfind("." + out.filename().string() + ".partial-", 0) != 0) continue;
    for (const auto& f : fs::recursive_directory_iterator(e.path(), ec))
      if (f.is_regular_file(ec)) total += f.file_size(ec);
  }
  return total;
}

// Waits until the build has written at least `bytes` of output, then sends
// `sig`. Returns the exit status, or -1 if the build ended before that.
int interrupt_after(pid_t pid, const fs::path& out, uintmax_t bytes, int sig) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  int status = 0;
  while (Clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return -1;  // finished (or failed) on its own
    if (partial_bytes(out) >= bytes) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(pid, sig);
  ::waitpid(pid, &status, 0);
  return status;
}

// What a reader of the output folder may see: either nothing under `out`'s
// name, or a complete model (summarize_model checks model.onnx and that its
// external data file is long enough; genai_config.json must parse).
void expect_nothing_or_complete(const fs::path& out) {
  for (const auto& e : fs::directory_iterator(out.parent_path())) {
    const std::string name = e.path().filename().string();
    if (name == out.filename().string()) continue;
    EXPECT_EQ(name.rfind("." + out.filename().string() + ".partial-", 0), 0u) << "unexpected leftover " << name;
  }
  if (!fs::exists(out)) return;
  EXPECT_NO_THROW(graph::summarize_model(out));
  EXPECT_NO_THROW(load_genai_config(out / "genai_config.json"));
}

TEST(Interrupt, KilledBuildLeavesNoCompleteLookingOutputAndRerunWorks) {
  TempDir tmp;
  const fs::path out = tmp / "model";
  for (int sig : {SIGINT, SIGKILL}) {
    SCOPED_TRACE(strsignal(sig));
    const int status = interrupt_after(start_build(out), out, 64 << 20, sig);
    ASSERT_NE(status, -1) << "the build ended before it could be interrupted";
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    EXPECT_FALSE(fs::exists(out)) << "an interrupted build left " << out;
    expect_nothing_or_complete(out);
  }
  // The same command again completes, the result is whole, and the temp
  // folders the killed builds left are gone (AtomicDir removes those of dead writers).
  auto r = run_cli({"build", "--checkpoint", checkpoint().string(), "--out", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_nothing_or_complete(out);
  ASSERT_TRUE(fs::exists(out / "model.onnx"));
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), {}), 1) << "stale temp folders were not removed";
  // Every entry of the finished output, with its size, to compare against below.
  std::map<std::string, uintmax_t> before;
  for (const auto& e : fs::directory_iterator(out)) before[e.path().filename().string()] = e.file_size();

  // Rebuilding over that output and killing it midway keeps the old one, untouched.
  const int status = interrupt_after(start_build(out), out, 64 << 20, SIGKILL);
  ASSERT_NE(status, -1) << "the rebuild ended before it could be interrupted";
  expect_nothing_or_complete(out);
  ASSERT_TRUE(fs::exists(out)) << "the interrupted rebuild removed the previous output";
  std::map<std::string, uintmax_t> after;
  for (const auto& e : fs::directory_iterator(out)) after[e.path().filename().string()] = e.file_size();
  EXPECT_EQ(before, after);
}

}  // namespace
}  // namespace deltagen
