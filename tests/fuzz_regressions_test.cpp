// Every input a fuzzer in fuzz/ found a bug with, replayed through the same
// call (docs/reliability.md lists the findings). Each must now be refused
// with a one-line deltagen::Error, or accepted, as the test says.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "graph/model_summary.h"
#include "runtime/genai_config.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/npy.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// The Error message of fn; fails on anything else.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    for (char c : m) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << "control byte in: " << m;
    return m;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a deltagen::Error: " << e.what();
  }
  return "";
}

fs::path write(const TempDir& tmp, const std::string& name, const std::string& bytes) {
  std::ofstream(tmp / name, std::ios::binary) << bytes;
  return tmp / name;
}

// npy_fuzz: a dtype holding control bytes was quoted raw into the message,
// which then spanned lines (and could carry terminal escapes). Error now
// escapes control characters in every message.
TEST(FuzzRegressions, NpyDtypeWithControlBytesGivesOneLineError) {
  TempDir tmp;
  std::string header = "{'descr': '<f\xff\xff\n\x1b[31m', 'fortran_order': False, 'shape': (1, 3), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  const uint16_t n = uint16_t(header.size());
  const auto p = write(tmp, "a.npy",
                       std::string("\x93NUMPY\x01\x00", 8) + std::string(reinterpret_cast<const char*>(&n), 2) +
                           header + std::string(12, '\0'));
  const std::string m = error_of([&] { read_npy(p); });
  EXPECT_NE(m.find("unsupported .npy dtype"), std::string::npos) << m;
  EXPECT_NE(m.find("\\n\\x1b[31m"), std::string::npos) << m;
}

TEST(FuzzRegressions, ErrorMessagesAreOneLine) {
  EXPECT_STREQ(Error("a\nb\tc\x01\x7f").what(), "a\\nb\\tc\\x01\\x7f");
  EXPECT_STREQ(Error(std::string("caf\xc3\xa9")).what(), "caf\xc3\xa9");  // UTF-8 stays as it is
}

}  // namespace
}  // namespace deltagen
