// The golden model on ONNX Runtime's WebGPU execution provider: the fp32
// build must reproduce the Hugging Face logits and tokens there as it does on
// the CPU, and every way --ep can fail must end in one clear line. (The fp16
// and q4f16 builds: webgpu_precision_test.cpp.)
//
// On a machine without a GPU the adapter is Mesa's lavapipe (Vulkan on the
// CPU, scripts/setup_webgpu.sh): its times say nothing about a GPU's, so no
// test here looks at speed. With no adapter at all these tests FAIL, naming
// the cause: a suite that skipped would hide a broken setup.
#include <gtest/gtest.h>

#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "runtime/execution_provider.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "runtime/snapshot.h"
#include "runtime_fixtures.h"
#include "cli_errors.h"
#include "test_util.h"
#include "webgpu_fixtures.h"
#include "util/npy.h"

namespace deltagen {
namespace {

using test::golden_file;
using test::max_abs_diff;
using test::fp32_dir;
using test::loaded;

// fp32 on WebGPU against HF's fp32 logits: measured 8e-5 on lavapipe (the
// CPU's tests demand 1e-4; another adapter may round differently).
constexpr double kTolerance = 2e-4;
constexpr int64_t kVocab = 512;
using test::kMaxLength;

std::vector<float> golden_f32(const std::string& name) { return read_npy(golden_file(name)).as_f32(); }

// Rows [first, first + count) of a [rows, kVocab] array.
std::vector<float> rows(const std::vector<float>& data, int64_t first, int64_t count) {
  return std::vector<float>(data.begin() + first * kVocab, data.begin() + (first + count) * kVocab);
}

// Logits of `ids` fed one token per run, appended to `out`.
void decode_each(Generator& gen, std::span<const int64_t> ids, std::vector<float>& out) {
  for (int64_t id : ids) {
    Logits step = gen.forward(std::span(&id, 1), true);
    out.insert(out.end(), step.data.begin(), step.data.end());
  }
}

// ---- fp32 against the golden set ---------------------------------------------------

TEST(WebGpuGolden, AdapterAndSessionExist) {
  Model* model = loaded(fp32_dir());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->ep(), ExecutionProvider::WebGpu);
  Generator gen(*model, 1, kMaxLength);
  EXPECT_TRUE(gen.state().on_device()) << "the state should live on the device";
}

TEST(WebGpuGolden, PrefillLogitsMatchGolden) {
  Model* model = loaded(fp32_dir());
  ASSERT_NE(model, nullptr);
  Generator gen(*model, 1, kMaxLength);
  const Logits l = gen.forward(test::golden_prompt_ids(), true);
  const double err = max_abs_diff(l.data, golden_f32("logits_prefill.npy"));
  RecordProperty("max_abs_diff", std::to_string(err));
  EXPECT_LE(err, kTolerance);
}

TEST(WebGpuGolden, Prefill7ThenFiveDecodeStepsMatchGolden) {
  Model* model = loaded(fp32_dir());
  ASSERT_NE(model, nullptr);
  Generator gen(*model, 1, kMaxLength);
  const auto prompt = test::golden_prompt_ids();
  std::vector<float> got = gen.forward(std::span(prompt).first(7), true).data;
  decode_each(gen, std::span(prompt).subspan(7), got);
  EXPECT_EQ(gen.state().past_length(), 12);
  const double err = max_abs_diff(got, golden_f32("logits_prefill7_decode5.npy"));
  RecordProperty("max_abs_diff", std::to_string(err));
  EXPECT_LE(err, kTolerance);
}

TEST(WebGpuGolden, GreedyTokensAreTheGoldenOnesInAnyPrefillChunking) {
  Model* model = loaded(fp32_dir());
  ASSERT_NE(model, nullptr);
  for (int64_t chunk : {0, 1, 5}) {  // 0 = the whole prompt in one run
    Generator gen(*model, 1, kMaxLength);
    GenerateOptions o{.max_new_tokens = 16, .prefill_chunk = chunk};
    EXPECT_EQ(generate_greedy(gen, test::golden_prompt_ids(), o).generated_ids, test::golden_greedy_ids())
        << "prefill chunk " << chunk;
  }
}

TEST(WebGpuGolden, PromptInChunksOf1And3And12GivesPrefillLogits) {
  Model* model = loaded(fp32_dir());
  ASSERT_NE(model, nullptr);
  const auto prompt = test::golden_prompt_ids();
  for (size_t chunk : {1, 3, 12}) {
    Generator gen(*model, 1, kMaxLength);
    std::vector<float> got;
    for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
      const Logits l = gen.forward(std::span(prompt).subspan(begin, std::min(chunk, prompt.size() - begin)), true);
      got.insert(got.end(), l.data.begin(), l.data.end());
    }
    const double err = max_abs_diff(got, golden_f32("logits_prefill.npy"));
    EXPECT_LE(err, kTolerance) << "chunk " << chunk;
    RecordProperty("chunk_err_" + std::to_string(chunk), std::to_string(err));
  }
}

// A snapshot reads the device's state through the host; restoring it writes
// the host, which must go back up before the next run.
TEST(WebGpuGolden, SnapshotRestoredContinuesIdentically) {
  Model* model = loaded(fp32_dir());
  ASSERT_NE(model, nullptr);
  const auto prompt = test::golden_prompt_ids();
  const auto rest = std::span(prompt).subspan(7);
  const auto golden_steps = rows(golden_f32("logits_prefill7_decode5.npy"), 7, 5);

  Generator gen(*model, 1, kMaxLength);
  gen.forward(std::span(prompt).first(7), false);
  const StateSnapshot snapshot = capture_row(gen.state(), 0, kVocab, {});
  std::vector<float> first;
  decode_each(gen, rest, first);
  EXPECT_LE(max_abs_diff(first, golden_steps), kTolerance);

  // Into a generator whose device state holds another sequence. The same
  // kernels on the same state give the same bits (so on lavapipe, as on the CPU).
  Generator other(*model, 1, kMaxLength);
  other.forward(std::vector<int64_t>{300, 42, 7, 99, 1}, false);
  restore_row(other.state(), 0, kVocab, snapshot);
  std::vector<float> again;
  decode_each(other, rest, again);
  EXPECT_TRUE(again == first) << "the restored state must give the same logits; max diff "
                              << max_abs_diff(again, first);

  // The same snapshot continued on the CPU: the state crossed devices intact.
  Generator cpu(test::golden_runtime_model(), 1, kMaxLength);
  restore_row(cpu.state(), 0, kVocab, snapshot);
  std::vector<float> on_cpu;
  decode_each(cpu, rest, on_cpu);
  EXPECT_LE(max_abs_diff(on_cpu, golden_steps), kTolerance);
}

TEST(WebGpuGolden, CliGeneratesTheGoldenTokens) {
  const auto r = test::run_cli({"generate", "--model", fp32_dir().string(), "--ids",
                                test::joined_ids(test::golden_prompt_ids(), ','), "--max-new-tokens", "16",
                                "--ignore-eos", "--ep", "webgpu"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(test::joined_ids(test::golden_greedy_ids(), ' ')), std::string::npos) << r.out;
}

// ---- --ep failures: one line, nonzero exit ------------------------------------------

using test::expect_one_line_error;

// `deltagen generate --ep <ep>` on the golden model; `env` (NAME=VALUE)
// reaches the CLI's process only, through env(1) given as the program.
test::CliResult generate_on(const std::string& ep, const std::vector<std::string>& env = {}) {
  std::vector<std::string> args = {"generate", "--model", fp32_dir().string(), "--ids", "5,17,300",
                                   "--max-new-tokens", "2", "--ep", ep};
  if (env.empty()) return test::run_cli(args);
  std::string cmd = "env";
  for (const auto& e : env) cmd += " " + test::shell_quote(e);
  cmd += " " + test::shell_quote(DELTAGEN_CLI);
  for (const auto& a : args) cmd += " " + test::shell_quote(a);
  const test::TempDir dir;
  cmd += " >" + test::shell_quote((dir / "out").string()) + " 2>" + test::shell_quote((dir / "err").string()) +
         " </dev/null";
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, test::read_text(dir / "out"), test::read_text(dir / "err")};
}

// ORT's own words for a missing device (as libonnxruntime.so spells them)
// become deltagen's explanation; any other failure is left to ORT's text.
TEST(EpFailure, DeviceCausesAreExplained) {
  EXPECT_NE(execution_provider_failure(ExecutionProvider::WebGpu, "Failed to get a WebGPU adapter: No supported adapters")
                .find("Vulkan driver"),
            std::string::npos);
  EXPECT_NE(execution_provider_failure(ExecutionProvider::Cuda,
                                       "OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library")
                .find("CUDA cannot start"),
            std::string::npos);
  EXPECT_EQ(execution_provider_failure(ExecutionProvider::WebGpu, "Unsupported data type: float8"), "");
}

TEST(EpCli, UnknownProviderNamesTheFlag) {
  const auto r = generate_on("tpu");
  expect_one_line_error(r, "--ep");
  expect_one_line_error(r, "tpu");
}

TEST(EpCli, CudaMissingFromThisOnnxRuntimeSaysSo) {
  if (missing_provider_library(ExecutionProvider::Cuda).empty())
    GTEST_SKIP() << "this ONNX Runtime has CUDA's provider library: the device check runs CUDA";
  expect_one_line_error(generate_on("cuda"), "does not contain it");
}

// No Vulkan driver at all (the loader is pointed at a file that does not exist).
TEST(EpCli, WebGpuWithoutAnAdapterSaysAVulkanDriverIsMissing) {
  const auto r = generate_on("webgpu", {"VK_ICD_FILENAMES=/nonexistent", "VK_DRIVER_FILES=/nonexistent"});
  expect_one_line_error(r, "no WebGPU adapter");
  expect_one_line_error(r, "Vulkan driver");
  expect_one_line_error(r, "lavapipe");
}

}  // namespace
}  // namespace deltagen
