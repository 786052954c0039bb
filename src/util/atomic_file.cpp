#include "util/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <string>
#include <system_error>

#include "util/error.h"

namespace deltagen {
namespace fs = std::filesystem;
namespace {

// Temp names carry the pid and a counter so concurrent writers never collide;
// the ".partial" marker makes an interrupted output obviously incomplete.
fs::path temp_name(const fs::path& target) {
  static std::atomic<int> counter{0};
  return target.parent_path() /
         ("." + target.filename().string() + ".partial-" + std::to_string(::getpid()) + "-" +
          std::to_string(counter++));
}

fs::path parent_or_dot(const fs::path& p) {
  return p.has_parent_path() ? p.parent_path() : fs::path(".");
}

}  // namespace

AtomicFile::AtomicFile(fs::path target) : target_(std::move(target)) {
  if (target_.filename().empty()) fail(target_.string(), "not a file name");
  fs::path dir = parent_or_dot(target_);
  if (!fs::is_directory(dir)) fail(target_.string(), "folder " + dir.string() + " does not exist");
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
