#include "util/atomic_file.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <string>
#include <system_error>

#include "deltagen/error.h"

namespace deltagen {
namespace fs = std::filesystem;
namespace {

// Temp names carry the pid and a counter so concurrent writers never collide;
// the ".partial" marker makes an interrupted output obviously incomplete.
// ".NAME.partial-", appended piece by piece: GCC 12 warns (-Wrestrict,
// falsely) on "literal" + string.
std::string partial_prefix(const fs::path& target) {
  std::string s(1, '.');
  s += target.filename().string();
  s += ".partial-";
  return s;
}

fs::path temp_name(const fs::path& target) {
  static std::atomic<int> counter{0};
  return target.parent_path() / (partial_prefix(target) + std::to_string(::getpid()) + "-" + std::to_string(counter++));
}

fs::path parent_or_dot(const fs::path& p) {
  return p.has_parent_path() ? p.parent_path() : fs::path(".");
}

// A writer killed outright (SIGKILL, Ctrl-C, power loss) leaves its temp
// file or folder behind; for a model build that can be gigabytes. The next
// writer of the same target removes the temp outputs of writers that no
// longer run (their pid is in the name), so rerunning cleans up. Outputs of
// live processes, and anything else in the folder, are left alone.
void remove_stale_partials(const fs::path& target) {
  const std::string prefix = partial_prefix(target);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent_or_dot(target), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // "<pid>-<counter>"
    pid_t pid = 0;
    const auto [end, err] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (err != std::errc() || pid <= 0 || end == rest.data() + rest.size() || *end != '-') continue;
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::error_code ignored;
    fs::remove_all(entry.path(), ignored);
  }
}

}  // namespace

AtomicFile::AtomicFile(fs::path target) : target_(std::move(target)) {
  if (target_.filename().empty()) fail(target_.string(), "not a file name");
  fs::path dir = parent_or_dot(target_);
  if (!fs::is_directory(dir)) fail(target_.string(), "folder " + dir.string() + " does not exist");
  remove_stale_partials(target_);
  temp_ = temp_name(target_);
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) fail(target_.string(), "cannot create file");
}

AtomicFile::~AtomicFile() {
  if (!done_) {
    out_.close();
    std::error_code ec;
    fs::remove(temp_, ec);
  }
}

void AtomicFile::commit() {
  out_.flush();
  bool ok = bool(out_);
  out_.close();
  if (!ok) fail(target_.string(), "write failed (disk full?)");
  std::error_code ec;
  fs::rename(temp_, target_, ec);
  if (ec) fail(target_.string(), "cannot rename into place: " + ec.message());
  done_ = true;
}

void write_file_atomic(const fs::path& target, std::string_view content) {
  AtomicFile f(target);
  f.stream().write(content.data(), std::streamsize(content.size()));
  f.commit();
}

AtomicDir::AtomicDir(fs::path target) : target_(std::move(target)) {
  if (target_.filename().empty()) target_ = target_.parent_path();  // "out/" -> "out"
  fs::path dir = parent_or_dot(target_);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(dir.string(), "cannot create folder: " + ec.message());
  if (fs::exists(target_) && !fs::is_directory(target_))
    fail(target_.string(), "exists and is not a folder");
  remove_stale_partials(target_);
  temp_ = temp_name(target_);
  fs::create_directory(temp_, ec);
  if (ec) fail(temp_.string(), "cannot create folder: " + ec.message());
}

AtomicDir::~AtomicDir() {
  if (!done_) {
    std::error_code ec;
    fs::remove_all(temp_, ec);
  }
}

void AtomicDir::commit() {
  std::error_code ec;
  fs::path old;
  if (fs::exists(target_)) {
    old = temp_name(target_);
    fs::rename(target_, old, ec);
    if (ec) fail(target_.string(), "cannot replace: " + ec.message());
  }
  fs::rename(temp_, target_, ec);
  if (ec) fail(target_.string(), "cannot rename into place: " + ec.message());
  done_ = true;
  if (!old.empty()) fs::remove_all(old, ec);
}

}  // namespace deltagen
