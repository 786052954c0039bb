// Shared helpers for the tests: where the golden set lives, temp folders,
// running the CLI as a user would.
#pragma once
#include <unistd.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/generator.h"
#include "deltagen/error.h"

namespace deltagen::test {

namespace fs = std::filesystem;

// ../shared/golden/tiny-a beside the repository; DELTAGEN_GOLDEN overrides.
inline fs::path golden_checkpoint() {
  if (const char* e = std::getenv("DELTAGEN_GOLDEN")) return fs::path(e);
  return fs::path(DELTAGEN_SOURCE_DIR) / ".." / "shared" / "golden" / "tiny-a";
}
inline fs::path golden_file(const std::string& name) { return golden_checkpoint() / "golden" / name; }

// The golden set's prompt (summary.json "prompt_ids"), for the tests that need
// it before any file is read.
inline const std::vector<int64_t> kGoldenPrompt = {5, 17, 300, 42, 7, 99, 123, 256, 1, 400, 33, 77};
// ../shared/golden/moe/tiny-moe-a: the mixture-of-experts checkpoint and its outputs.
inline fs::path moe_golden_checkpoint() { return golden_checkpoint().parent_path() / "moe" / "tiny-moe-a"; }
inline fs::path moe_golden_file(const std::string& name) { return moe_golden_checkpoint() / "golden" / name; }
// ../shared/golden/vision: tiny-vl (a checkpoint with a vision tower), images/, golden/small/.
inline fs::path vision_golden_dir() { return golden_checkpoint().parent_path() / "vision"; }
inline fs::path vision_golden_file(const std::string& name) { return vision_golden_dir() / "golden" / "small" / name; }

// A fresh folder under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "deltagen-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& s) const { return path_ / s; }

 private:
  fs::path path_;
};

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs build/deltagen with the given arguments; captures stdout and stderr.
inline CliResult run_cli(const std::vector<std::string>& args) {
  static int counter = 0;
  fs::path base = fs::temp_directory_path() /
                  ("deltagen-cli-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::string cmd = shell_quote(DELTAGEN_CLI);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(base.string() + ".out") + " 2>" + shell_quote(base.string() + ".err") + " </dev/null";
  int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(base.string() + ".out");
  r.err = read_text(base.string() + ".err");
  fs::remove(base.string() + ".out");
  fs::remove(base.string() + ".err");
  return r;
}

// Max |a - b| over two equally long arrays (inf if the sizes differ).
template <class A, class B>
double max_abs_diff(const A& a, const B& b) {
  if (a.size() != b.size()) return 1e300;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

// Two sessions' logits for the same input: the largest difference within
// tol x (1 + the largest magnitude of `want`).
inline void expect_logits_close(const Logits& got, const Logits& want, double tol, const std::string& what) {
  ASSERT_EQ(got.data.size(), want.data.size()) << what;
  double worst = 0, scale = 0;
  for (size_t i = 0; i < got.data.size(); ++i) {
    worst = std::max(worst, double(std::fabs(got.data[i] - want.data[i])));
    scale = std::max(scale, double(std::fabs(want.data[i])));
  }
  EXPECT_LE(worst, tol * (1.0 + scale)) << what;
}

// The message of the deltagen::Error `fn` throws, checked to be one line;
// fails the test if it throws nothing or something else ("" then).
inline std::string error_message(const std::function<void()>& fn) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << "not one line: " << m;
    return m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a deltagen::Error: " << e.what();
  }
  return "";
}

// `fn` throws a one-line deltagen::Error that says `phrase`.
inline void expect_error(const std::function<void()>& fn, const std::string& phrase) {
  const std::string m = error_message(fn);
  EXPECT_NE(m.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << m;
}

}  // namespace deltagen::test
