// `deltagen serve` as a child process on loopback, serving the small trained
// model every server test uses: ../shared/models/qwen35-tiny-en built with
// `deltagen build --precision int4` once per test process, with the Qwen3
// tokenizer (third_party/tokenizer/qwen3) and the official Qwen3.5 chat
// template (../shared/reference/chat-templates/qwen3.5.jinja) copied in.
// Used by serve_test.cpp (one server per client kind) and
// serve_scale_out_test.cpp (several replicas behind a router).
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "serve_scripts.h"
#include "test_util.h"

namespace deltagen::test {

using ServeClock = std::chrono::steady_clock;

inline constexpr const char* kAlias = "qwen35-tiny-en";  // the name every test server serves under

inline fs::path shared_dir() { return source_dir() / ".." / "shared"; }
inline fs::path tiny_en_checkpoint() { return shared_dir() / "models" / "qwen35-tiny-en"; }
inline fs::path chat_template_file() { return shared_dir() / "reference" / "chat-templates" / "qwen3.5.jinja"; }
// The model folder, built once per process.
inline const fs::path& model_dir() {
  static TempDir dir;
  static const fs::path model = [] {
    const fs::path out = dir / "qwen35-tiny-en-int4";
    const test::CliResult r = test::run_cli(
        {"build", "--checkpoint", tiny_en_checkpoint().string(), "--out", out.string(), "--precision", "int4"});
    if (r.exit_code != 0) throw std::runtime_error("deltagen build failed: " + r.err);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(tokenizer_assets() / "qwen3" / f, out / f, fs::copy_options::overwrite_existing);
    fs::copy_file(chat_template_file(), out / "chat_template.jinja", fs::copy_options::overwrite_existing);
    return out;
  }();
  return model;
}

// `deltagen serve` as a child process.
class Server {
 public:
  // Returns once it serves ("listening on URL" on its stdout); with
  // `wait` false at once (then call wait_until_serving()).
  Server(std::string name, std::vector<std::string> flags, std::string api_key = "", bool wait = true)
      : name_(std::move(name)), api_key_(std::move(api_key)) {
    const fs::path out = logs_ / "stdout", err = logs_ / "stderr";
    std::vector<std::string> args = {DELTAGEN_CLI, "serve", "--model", model_dir().string(), "--host", "127.0.0.1",
                                     "--port", "0", "--alias", kAlias, "--threads", "1"};
    if (!api_key_.empty()) args.insert(args.end(), {"--api-key", api_key_});
    args.insert(args.end(), flags.begin(), flags.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int in = ::open("/dev/null", O_RDONLY);
      ::dup2(in, 0), ::dup2(o, 1), ::dup2(e, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    if (wait) wait_until_serving();
  }

  void wait_until_serving() {
    const fs::path out = logs_ / "stdout", err = logs_ / "stderr";
    // It prints "listening on http://127.0.0.1:PORT" once bound.
    const std::regex listening(R"(listening on (http://127\.0\.0\.1:(\d+)))");
    const auto deadline = ServeClock::now() + std::chrono::seconds(120);
    while (ServeClock::now() < deadline) {
      std::smatch m;
      const std::string text = read_text(out);
      if (std::regex_search(text, m, listening)) {
        base_ = m[1];
        return;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error(name_ + ": deltagen serve exited before listening: " + read_text(err));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    throw std::runtime_error(name_ + ": deltagen serve did not start within 120 s: " + read_text(err));
  }
  ~Server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& base() const { return base_; }
  const std::string& api_key() const { return api_key_; }
  pid_t pid() const { return pid_; }
  std::string log() const { return read_text(logs_ / "stderr"); }

  // Resident memory now (/proc/PID/status VmRSS), in KiB.
  int64_t rss_kib() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
    return -1;
  }

  void signal(int sig) const { ::kill(pid_, sig); }

  // Waits for the process to end; its exit status, or nullopt after `timeout` (then it is killed).
  std::optional<int> wait(std::chrono::seconds timeout) {
    const auto deadline = ServeClock::now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (ServeClock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }

  // The first match of `pattern` in its stderr within `timeout` (empty: none came).
  std::smatch wait_for_log(const std::regex& pattern, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    static thread_local std::string text;
    do {
      text = log();
      std::smatch m;
      if (std::regex_search(text, m, pattern)) return m;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } while (std::chrono::steady_clock::now() < deadline);
    return {};
  }

  // SIGTERM, then the exit status (nullopt: still running 30 s later).
  std::optional<int> stop() {
    signal(SIGTERM);
    return wait(std::chrono::seconds(30));
  }

 private:
  std::string name_, api_key_, base_;
  TempDir logs_;
  pid_t pid_ = -1;
};

}  // namespace deltagen::test
