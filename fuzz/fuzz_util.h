// Shared pieces of the libFuzzer targets in fuzz/ (see docs/reliability.md).
//
// The contract every parser in deltagen promises is: on any input it either
// succeeds or throws deltagen::Error with a one-line message. So a target
// calls the parser through expect_only_error(): an Error is an accepted
// rejection, anything else (another exception type, a crash, a sanitizer
// report, an allocation above libFuzzer's -malloc_limit_mb, a timeout) is a
// finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "deltagen/error.h"

namespace deltagen::fuzz {

namespace fs = std::filesystem;

// A private folder for the inputs that parsers can only read from a file
// (the mmap-based safetensors reader, .npy, genai_config.json, ONNX). Made
// once per process on tmpfs when there is one, removed at exit.
inline const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string tmpl = (base / "deltagen-fuzz-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    static const std::string to_remove = tmpl;
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(to_remove, ec);
    });
    return fs::path(tmpl);
  }();
  return dir;
}

// Writes `data` to scratch_dir()/name (replacing it) and returns the path.
inline fs::path write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  fs::path p = scratch_dir() / name;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", p.c_str());
    std::abort();
  }
  return p;
}

// Aborts (a finding) with a message naming what broke the contract.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\n==== deltagen fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Runs fn(); returns true if it returned, false if it threw deltagen::Error
// (whose message must be one line). Any other exception is a finding.
template <class Fn>
bool expect_only_error(const char* what, Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const Error& e) {
    if (std::string_view(e.what()).find('\n') != std::string_view::npos)
      finding(std::string(what) + ": Error message is not one line: " + e.what());
    return false;
  } catch (const std::exception& e) {
    finding(std::string(what) + ": threw a non-deltagen exception: " + e.what());
  } catch (...) {
    finding(std::string(what) + ": threw something that is not a std::exception");
  }
}

}  // namespace deltagen::fuzz
