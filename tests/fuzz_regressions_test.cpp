// Every input a fuzzer in fuzz/ found a bug with, replayed through the same
// call (docs/reliability.md lists the findings). Each must now be refused
// with a one-line deltagen::Error, or accepted, as the test says.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "graph/model_summary.h"
#include "rewrite/model_rewrite.h"
#include "runtime/genai_config.h"
#include "runtime/generator.h"
#include "runtime/snapshot.h"
#include "runtime_fixtures.h"
#include "serve/openai_request.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "deltagen/error.h"
#include "util/npy.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// The Error message of fn (test::error_message), also free of control bytes.
std::string error_of(const std::function<void()>& fn) {
  const std::string m = test::error_message(fn);
  for (char c : m) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << "control byte in: " << m;
  return m;
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

// npy_fuzz: an array with a zero dimension made as_f32/as_f64/as_i64 call
// memcpy with a null pointer (undefined behavior, reported by UBSan).
TEST(FuzzRegressions, NpyEmptyArrayConverts) {
  TempDir tmp;
  const float none[1] = {0};
  write_npy_f32(tmp / "e.npy", none, {0, 3});
  const NpyArray a = read_npy(tmp / "e.npy");
  EXPECT_EQ(a.numel(), 0);
  EXPECT_TRUE(a.as_f32().empty());
  EXPECT_TRUE(a.as_f64().empty());
}

// The FNV-1a checksum the snapshot format ends with, over all bytes before it.
void fix_checksum(std::vector<std::byte>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i + 8 < bytes.size(); ++i) h = (h ^ uint64_t(bytes[i])) * 0x100000001b3ull;
  std::memcpy(bytes.data() + bytes.size() - 8, &h, 8);
}

// snapshot_fuzz seed generation: capturing and restoring an empty state
// (KV length 0) called memcpy with a null pointer (UBSan).
TEST(FuzzRegressions, EmptyStateSnapshotRoundTrips) {
  Generator g(test::golden_runtime_model());
  const auto bytes = serialize_snapshot(capture_row(g.state(), 0, test::kGoldenVocab, {}));
  const StateSnapshot s = parse_snapshot(bytes, "empty.dgstate");
  EXPECT_EQ(s.length, 0);
  restore_row(g.state(), 0, test::kGoldenVocab, s);
  EXPECT_EQ(g.state().length(0), 0);
}

// snapshot_fuzz: a cache element type outside ONNXTensorElementDataType's
// range was cast to the enum before being checked (UBSan: invalid enum load).
TEST(FuzzRegressions, SnapshotWithUnknownElementTypeIsRefused) {
  Generator g(test::golden_runtime_model());
  auto bytes = serialize_snapshot(capture_row(g.state(), 0, test::kGoldenVocab, {}));
  // magic 8, version 4, reserved 4, vocab 8, length 8, token count 8, cache count 4; then the
  // first cache's layer 4, kind 4, element type 4.
  const uint32_t bad_type = 65537;
  std::memcpy(bytes.data() + 52, &bad_type, 4);
  fix_checksum(bytes);
  EXPECT_NE(error_of([&] { parse_snapshot(bytes, "bad.dgstate"); }).find("unsupported element type"), std::string::npos);
}

// Found while writing genai_config_fuzz's oracle: decoder.filename could be
// absolute or climb out with "..", pointing the runtime at any file on the machine.
TEST(FuzzRegressions, GenaiConfigModelFileStaysInTheFolder) {
  TempDir tmp;
  auto config = [&](const std::string& filename) {
    return write(tmp, "genai_config.json",
                 nlohmann::json{{"model", {{"decoder", {{"filename", filename}}}}}}.dump());
  };
  for (const std::string bad : {"/etc/passwd", "../model.onnx", "onnx/../../model.onnx"}) {
    SCOPED_TRACE(bad);
    EXPECT_NE(error_of([&] { load_genai_config(config(bad)); }).find("outside the model folder"), std::string::npos);
  }
  EXPECT_EQ(load_genai_config(config("onnx/model.onnx")).model_filename, "onnx/model.onnx");
}

// model_rewrite_fuzz: a MatMulNBits whose B initializer claims dims whose
// product overflows int64 made the element count UB (UBSan). Such a node now
// simply stays on ORT's kernel, as do K/N attributes past any real model.
TEST(FuzzRegressions, RewriteRefusesMatMulNBitsWithOverflowingDims) {
  onnx::ModelProto model;
  auto* g = model.mutable_graph();
  auto* node = g->add_node();
  node->set_op_type("MatMulNBits");
  node->set_domain("com.microsoft");
  for (const char* in : {"a", "b", "scales"}) node->add_input(in);
  node->add_output("y");
  for (auto [name, value] : {std::pair<const char*, int64_t>{"bits", 4}, {"block_size", 32}, {"K", 64},
                             {"N", 16}, {"accuracy_level", 4}}) {
    auto* a = node->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto_AttributeType_INT);
    a->set_i(value);
  }
  auto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto_DataType_UINT8);
  b->add_dims(1013345627662909440);
  b->add_dims(18);
  auto* scales = g->add_initializer();
  scales->set_name("scales");
  scales->set_data_type(onnx::TensorProto_DataType_FLOAT);
  scales->add_dims(32);
  rewrite::RewriteSummary s = rewrite::use_deltagen_kernels(model);
  EXPECT_EQ(s.rewritten, 0);
  EXPECT_EQ(s.kept["B layout"], 1);
  node->mutable_attribute(3)->set_i(int64_t(1) << 62);  // N
  s = rewrite::use_deltagen_kernels(model);
  EXPECT_EQ(s.kept["K or N out of range"], 1);
}

// serve_request_fuzz (seconds into its first run): a number beyond a double
// ("temperature": 1e400) is valid JSON that nlohmann refuses with
// out_of_range, not parse_error; it escaped parse_body and the server
// answered 500. It is now a 400 like any unreadable body.
TEST(FuzzRegressions, RequestBodyWithHugeNumberIs400) {
  try {
    serve::parse_body(R"({"messages": [{"role": "user", "content": "hi"}], "temperature": 1e400})");
    ADD_FAILURE() << "accepted";
  } catch (const serve::ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.type, "invalid_request_error");
    EXPECT_NE(std::string(e.what()).find("number overflow"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace deltagen
