// Outputs appear complete or not at all: everything is written under a temp
// name next to the target and renamed into place on commit(). An object that
// is destroyed without commit() (an exception, an early return) removes its
// temp file or folder.
#pragma once
#include <filesystem>
#include <fstream>
#include <string_view>

namespace deltagen {

class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path target);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ofstream& stream() { return out_; }
  void commit();  // flush, check the stream, rename over the target; throws Error

 private:
  std::filesystem::path target_, temp_;
  std::ofstream out_;
  bool done_ = false;
};

void write_file_atomic(const std::filesystem::path& target, std::string_view content);

// A whole output folder: fill path(), then commit() swaps it in place of
// `target` (an existing target is replaced only once the new one is complete).
class AtomicDir {
 public:
  explicit AtomicDir(std::filesystem::path target);
  ~AtomicDir();
  AtomicDir(const AtomicDir&) = delete;
  AtomicDir& operator=(const AtomicDir&) = delete;

  const std::filesystem::path& path() const { return temp_; }
  void commit();

 private:
  std::filesystem::path target_, temp_;
  bool done_ = false;
};

}  // namespace deltagen
