// What every CLI bad-input test checks: a nonzero exit and an error that is
// one line, "error: ...", saying `phrase`. It is the last line of stderr
// (ORT and Dawn may log warnings of their own before it).
#pragma once
#include <string>

#include <gtest/gtest.h>

#include "test_util.h"

namespace deltagen::test {

inline void expect_one_line_error(const CliResult& r, const std::string& phrase) {
  EXPECT_NE(r.exit_code, 0);
  const size_t at = r.err.rfind("error: ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const std::string line = r.err.substr(at);
  EXPECT_EQ(line.find('\n'), line.size() - 1) << r.err;
  EXPECT_NE(line.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << r.err;
}

}  // namespace deltagen::test
