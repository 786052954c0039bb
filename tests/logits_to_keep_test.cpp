// logits_to_keep: the decoder's int64 input with a default (0 = every
// position). Runtimes that do not know it get every position; the generation
// loop feeds 1 when it reads the last row, so a prompt's lm_head covers one
// row instead of all of them.
#include <gtest/gtest.h>

#include <cmath>

#include "checkpoint/checkpoint.h"
#include "measure/graph_facts.h"
#include "models/build.h"
#include "ort_step_runner.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "runtime_fixtures.h"
#include "test_util.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kVocab = test::kGoldenVocab;

// The golden checkpoint in int4 (its lm_head a MatMulNBits), once per process.
const fs::path& golden_int4_dir() {
  static test::TempDir dir;
  static const fs::path model = [] {
    BuildOptions o;
    o.show_progress = false;
    o.context_length = 256;
    o.precision = Precision::Int4;
    build_model(*Checkpoint::open(test::golden_checkpoint()), o, dir / "int4");
    return dir / "int4";
  }();
  return model;
}

TEST(LogitsToKeep, StockOrtGivesEveryPositionUnlessAskedForTheLastN) {
  // Straight through ONNX Runtime, as onnxruntime-genai would run the file.
  const std::filesystem::path file = test::golden_model_dir() / "model.onnx";
  const int64_t n = int64_t(test::kGoldenPrompt.size());
  const std::vector<float> every = test::StepRunner(file).step(test::kGoldenPrompt);
  ASSERT_EQ(int64_t(every.size()), n * kVocab);
  for (int64_t keep : {int64_t(1), int64_t(3), n}) {
    test::StepRunner run(file);
    run.extra_inputs["logits_to_keep"] = {keep};
    const std::vector<float> last = run.step(test::kGoldenPrompt);
    ASSERT_EQ(int64_t(last.size()), keep * kVocab) << keep;
    // Row for row the same numbers: the lm_head's rows do not depend on each other.
    const std::vector<float> tail(every.end() - keep * kVocab, every.end());
    EXPECT_LT(test::max_abs_diff(last, tail), 1e-5) << keep;
  }
}

TEST(LogitsToKeep, ThePromptsLastRowIsTheRowOfARunOverEveryPosition) {
  for (const fs::path& dir : {test::golden_model_dir(), golden_int4_dir()})
  for (KernelSet kernels : {KernelSet::Ort, KernelSet::DeltagenOps, KernelSet::Deltagen}) {
    SCOPED_TRACE(dir.filename().string() + measure::kernel_set_label(kernels));
    auto model = Model::load(dir, RuntimeOptions{.intra_op_threads = 2, .kernels = {.set = kernels}});
    ASSERT_TRUE(model->io().has_logits_to_keep);
    Generator all(*model, 1, 64), last(*model, 1, 64);
    const Logits every = all.forward(test::kGoldenPrompt, true);
    const Logits one = last.forward(test::kGoldenPrompt, false);
    ASSERT_EQ(every.rows, int64_t(test::kGoldenPrompt.size()));
    ASSERT_EQ(one.rows, 1);
    const std::vector<float> want(every.row(0, every.rows - 1), every.row(0, every.rows - 1) + kVocab);
    const std::vector<float> got(one.row(0, 0), one.row(0, 0) + kVocab);
    if (kernels == KernelSet::Ort)  // MLAS may block one row differently from twelve
      EXPECT_LT(test::max_abs_diff(got, want), 1e-4);
    else  // deltagen's kernels give a row the same bits whatever the other rows
      EXPECT_EQ(got, want);
    // And the state after either run is the same: the next step agrees.
    const std::vector<int64_t> next = {42};
    const Logits a = all.forward(next, false), b = last.forward(next, false);
    EXPECT_EQ(a.data, b.data);
  }
}

}  // namespace
}  // namespace deltagen
