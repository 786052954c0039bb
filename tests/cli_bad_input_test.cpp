// Every bad input a user can hand the CLI, for each file it reads: the
// command exits nonzero, prints one line naming the file and the problem, and
// leaves no output behind.
#include <gtest/gtest.h>

#include "broken_checkpoints.h"
#include "test_util.h"

namespace deltagen {
namespace {

using test::run_cli;
using test::TempDir;
namespace fs = std::filesystem;

// The error is one line, starts with "error: " and names what it should.
void expect_one_line_error(const test::CliResult& r, const std::string& file, const std::string& problem) {
  EXPECT_NE(r.exit_code, 0);
  ASSERT_FALSE(r.err.empty());
  std::string line = r.err.substr(r.err.rfind("error: "));
  EXPECT_EQ(line.find('\n'), line.size() - 1) << r.err;
  EXPECT_NE(line.find(problem), std::string::npos) << "expected '" << problem << "' in: " << r.err;
  if (!file.empty()) EXPECT_NE(line.find(file), std::string::npos) << "expected '" << file << "' in: " << r.err;
}

size_t entries(const fs::path& dir) { return size_t(std::distance(fs::directory_iterator(dir), {})); }

TEST(CliBadInput, BrokenCheckpointsFailCleanlyInEveryCommand) {
  for (const auto& b : test::checkpoint_breakages()) {
    SCOPED_TRACE(b.name);
    TempDir tmp;
    auto ck = tmp / "ck";
    test::copy_golden(ck);
    b.apply(ck);
    auto out = tmp / "out";
    fs::create_directories(out);

    auto r = run_cli({"build", "--checkpoint", ck.string(), "--out", (out / "model").string()});
    expect_one_line_error(r, b.expect_file, b.expect_problem);

    r = run_cli({"reference", "--checkpoint", ck.string(), "--ids", "5,17", "--max-new-tokens", "2",
                 "--logits-out", (out / "logits.npy").string()});
    expect_one_line_error(r, b.expect_file, b.expect_problem);

    EXPECT_EQ(entries(out), 0u) << "output left behind";
  }
}

TEST(CliBadInput, BadModelFolderFailsCleanly) {
  TempDir tmp;
  auto out = tmp / "out";
  fs::create_directories(out);
  auto model = tmp / "model";
  auto r = run_cli({"build", "--checkpoint", test::golden_checkpoint().string(), "--out", model.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  auto gen = [&](const fs::path& m, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"generate", "--model", m.string(), "--ids", "5,17,300", "--max-new-tokens", "3",
                                  "--logits-out", (out / "l.npy").string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_cli(a);
  };
  expect_one_line_error(gen(tmp / "nowhere"), "nowhere", "");

  // A truncated / garbage model.onnx.
  auto broken = tmp / "broken";
  fs::copy(model, broken, fs::copy_options::recursive);
  test::write_text(broken / "model.onnx", "this is not a protobuf");
  expect_one_line_error(gen(broken), "model.onnx", "");
  expect_one_line_error(run_cli({"inspect", broken.string()}), "model.onnx", "");

  // Token ids outside the vocabulary, malformed lists, a prompt longer than the context.
  expect_one_line_error(run_cli({"generate", "--model", model.string(), "--ids", "5,512", "--max-new-tokens", "1"}),
                        "", "512");
  expect_one_line_error(run_cli({"generate", "--model", model.string(), "--ids", "5,x", "--max-new-tokens", "1"}),
                        "--ids", "not a comma-separated list");
  expect_one_line_error(run_cli({"generate", "--model", model.string(), "--ids", "5", "--max-new-tokens", "100000"}),
                        "", "context");
  expect_one_line_error(run_cli({"generate", "--model", model.string(), "--ids", "5", "--max-new-tokens", "1", "--bogus", "1"}), "",
                        "unknown flag --bogus");
  expect_one_line_error(run_cli({"reference", "--checkpoint", test::golden_checkpoint().string(), "--ids", "5",
                                 "--max-new-tokens", "100000"}),
                        "", "context");
  EXPECT_EQ(entries(out), 0u) << "output left behind";
}

TEST(CliBadInput, UnknownCommandAndMissingFlags) {
  auto r = run_cli({"frobnicate"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos);
  expect_one_line_error(run_cli({"build", "--out", "x"}), "", "missing required flag --checkpoint");
  expect_one_line_error(run_cli({"synth", "--preset", "tiny"}), "", "missing required flag --out");
  EXPECT_FALSE(fs::exists("x"));
}

}  // namespace
}  // namespace deltagen
