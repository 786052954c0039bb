// The execution provider switches that need no device: names, the
// provider a model was built for (genai_config.json), --target's defaults.
// Running on WebGPU is tests/webgpu_test.cpp.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "runtime/genai_config.h"
#include "test_util.h"
#include "tools/args.h"
#include "tools/build_args.h"
#include "deltagen/error.h"
#include "deltagen/options.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(ExecutionProviderNames, RoundTripAndRefuseUnknown) {
  for (ExecutionProvider ep : {ExecutionProvider::Cpu, ExecutionProvider::WebGpu, ExecutionProvider::Cuda})
    EXPECT_EQ(parse_execution_provider(execution_provider_name(ep)), ep);
  EXPECT_EQ(parse_execution_provider("WebGPU"), ExecutionProvider::WebGpu);
  test::expect_error([] { parse_execution_provider("tpu"); }, "expected cpu, webgpu or cuda, not 'tpu'");
}

fs::path write_config(const test::TempDir& tmp, const json& provider_options) {
  const fs::path path = tmp / "genai_config.json";
  std::ofstream(path) << json{{"model", {{"decoder", {{"session_options", {{"provider_options", provider_options}}}}}}}}.dump();
  return path;
}

TEST(GenaiConfigProvider, FirstKnownProviderIsTheModels) {
  test::TempDir tmp;
  EXPECT_FALSE(load_genai_config(write_config(tmp, json::array())).provider);
  EXPECT_EQ(load_genai_config(write_config(tmp, json::array({{{"webgpu", json::object()}}}))).provider,
            ExecutionProvider::WebGpu);
  // onnxruntime-genai lists providers by preference; ones deltagen does not run are passed over.
  EXPECT_EQ(load_genai_config(write_config(tmp, json::array({{{"dml", json::object()}}, {{"cuda", {{"x", "1"}}}}})))
                .provider,
            ExecutionProvider::Cuda);
  test::expect_error([&] { load_genai_config(write_config(tmp, json::object())); }, "is not a list");
  test::expect_error([&] { load_genai_config(write_config(tmp, json::array({"webgpu"}))); },
                     "entries must be");
}

BuildOptions build_options(std::vector<std::string> words) {
  std::vector<char*> argv = {const_cast<char*>("build")};
  for (auto& w : words) argv.push_back(w.data());
  Args args(int(argv.size()), argv.data(), build_switches());
  return build_options_from_args(args);
}

TEST(BuildTarget, GpuTargetsDefaultToQ4f16UnlessPrecisionIsGiven) {
  const BuildOptions cpu = build_options({});
  EXPECT_EQ(cpu.target, ExecutionProvider::Cpu);
  EXPECT_EQ(cpu.precision, Precision::Fp32);
  const BuildOptions webgpu = build_options({"--target", "webgpu"});
  EXPECT_EQ(webgpu.target, ExecutionProvider::WebGpu);
  EXPECT_EQ(webgpu.precision, Precision::Int4);
  EXPECT_EQ(webgpu.activations, FloatType::Fp16);
  const BuildOptions fp32 = build_options({"--target", "cuda", "--precision", "fp32"});
  EXPECT_EQ(fp32.precision, Precision::Fp32);
  EXPECT_FALSE(fp32.activations);
  test::expect_error([] { build_options({"--target", "tpu"}); }, "--target: expected cpu, webgpu or cuda");
}

}  // namespace
}  // namespace deltagen
