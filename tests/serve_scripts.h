// Running the server tests' Node.js scripts (tests/serve/*.mjs) from a
// test: where node's packages and Chromium are, whether they are here, and
// one script run with its JSON result. Used by serve_test.cpp (the CLI's
// server) and vision_serve_test.cpp (the chat page with an image).
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace deltagen::test {

inline fs::path source_dir() { return fs::path(DELTAGEN_SOURCE_DIR); }

inline fs::path tokenizer_assets() {
  if (const char* e = std::getenv("DELTAGEN_TOKENIZER_ASSETS")) return e;
  return source_dir() / "third_party" / "tokenizer";
}
inline fs::path node_modules() {
  if (const char* e = std::getenv("DELTAGEN_NODE_MODULES")) return e;
  return source_dir() / "third_party" / "node_modules";
}
inline fs::path jinja_module() { return tokenizer_assets() / "node_modules" / "@huggingface" / "jinja"; }
inline constexpr const char* kChromium = "/usr/bin/chromium";

// Why these tests cannot run here ("" when they can).
inline std::string missing_prerequisite(bool browser) {
  if (std::system("node --version >/dev/null 2>&1") != 0) return "node not found: the server tests run Node.js clients";
  for (const fs::path& p : {node_modules() / "openai" / "package.json", node_modules() / "playwright-core" / "package.json",
                            jinja_module() / "package.json", tokenizer_assets() / "qwen3" / "tokenizer.json"})
    if (!fs::exists(p)) return p.string() + " missing: run scripts/fetch_tokenizer_assets.sh";
  if (browser && ::access(kChromium, X_OK) != 0)
    return std::string(kChromium) + " missing: install Debian's chromium (scripts/setup.sh does)";
  return "";
}

// A folder for what the node scripts write (screenshots, conversations),
// kept after the run: build/Testing/serve/NAME.
inline fs::path out_dir(const std::string& name) {
  const fs::path p = fs::path(DELTAGEN_CLI).parent_path() / "Testing" / "serve" / name;
  fs::create_directories(p);
  return p;
}

struct ScriptResult {
  int exit_code = -1;
  std::string out, err;
  nlohmann::json result;  // the last line of stdout, parsed
};

// The shell command that runs tests/serve/NAME with the config, killed after timeout_s.
inline std::string node_command(const std::string& name, const nlohmann::json& config, int timeout_s) {
  const fs::path script = source_dir() / "tests" / "serve" / name;
  return "timeout -k 5 " + std::to_string(timeout_s) + " node " + shell_quote(script.string()) + " " +
         shell_quote(config.dump());
}

// Runs tests/serve/NAME with the config; fails the test (and returns a null
// result) when the script fails or prints no JSON.
inline ScriptResult run_script(const std::string& name, const nlohmann::json& config, int timeout_s = 120) {
  TempDir tmp;
  const std::string cmd = node_command(name, config, timeout_s) + " >" + shell_quote((tmp / "out").string()) + " 2>" +
                          shell_quote((tmp / "err").string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  ScriptResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(tmp / "out");
  r.err = read_text(tmp / "err");
  EXPECT_EQ(r.exit_code, 0) << name << (r.exit_code == 124 ? " timed out" : " failed") << ":\n" << r.err << r.out;
  if (r.exit_code == 0) {
    const size_t end = r.out.find_last_not_of('\n');
    const size_t start = end == std::string::npos ? 0 : r.out.rfind('\n', end);
    r.result = nlohmann::json::parse(r.out.substr(start == std::string::npos ? 0 : start + 1), nullptr, false);
    EXPECT_FALSE(r.result.is_discarded()) << name << " printed no JSON:\n" << r.out;
    if (r.result.is_discarded()) r.result = nullptr;
  }
  return r;
}

}  // namespace deltagen::test
