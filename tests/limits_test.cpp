// Limits that protect the machine (docs/reliability.md): every absurd size a
// downloaded file or a flag can announce is refused with a clear one-line
// Error *before* anything of that size is allocated or looped over. Each
// test below names the limit it pins; the values used are far past any real
// model, so a test that hangs or runs out of memory is the bug it guards.
//
// The CLI cases run under an address-space limit (ulimit -v, 4 GB) when the
// build is not sanitized, so a missing check fails fast with bad_alloc
// instead of swapping the machine (ASan reserves terabytes of shadow memory
// and cannot run under ulimit -v, so sanitized builds run them unlimited).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "broken_checkpoints.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/config.h"
#include "checkpoint/safetensors.h"
#include "graph/model_summary.h"
#include "runtime/generator.h"
#include "runtime/snapshot.h"
#include "runtime_fixtures.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "deltagen/error.h"
#include "util/npy.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

constexpr int64_t kTrillion = 1000000000000;

// The message of the Error fn throws; fails the test if it throws nothing, or
// something else, or takes long (a limit must be checked up front).
std::string error_of(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  const std::string message = test::error_message(fn);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "refused, but slowly: " << message;
  return message;
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "expected '" << (needle) << "' in: " << (haystack)

std::string le64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

// A safetensors file: 8-byte length, `header`, then `data_bytes` zero bytes.
fs::path write_safetensors_raw(const fs::path& p, const std::string& header, size_t data_bytes,
                               uint64_t announced_length = 0) {
  test::write_text(p, le64(announced_length ? announced_length : header.size()) + header +
                          std::string(data_bytes, '\0'));
  return p;
}

// The CLI under a 4 GB address-space limit (see the top of the file).
test::CliResult run_cli_limited(const std::vector<std::string>& args) {
#ifdef DELTAGEN_SANITIZE
  return test::run_cli(args);
#else
  static int counter = 0;
  const fs::path base = fs::temp_directory_path() /
                        ("deltagen-limits-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::string cmd = "ulimit -v 4194304; exec " + test::shell_quote(DELTAGEN_CLI);
  for (const auto& a : args) cmd += " " + test::shell_quote(a);
  cmd += " >" + test::shell_quote(base.string() + ".out") + " 2>" + test::shell_quote(base.string() + ".err") +
         " </dev/null";
  const int status = std::system(("sh -c " + test::shell_quote(cmd)).c_str());
  test::CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = test::read_text(base.string() + ".out");
  r.err = test::read_text(base.string() + ".err");
  fs::remove(base.string() + ".out");
  fs::remove(base.string() + ".err");
  return r;
#endif
}

// ---- safetensors: header size, offsets, shape products --------------------------------

TEST(Limits, SafetensorsHeaderLengthIsBounded) {
  TempDir tmp;
  // A header length of 1 TB: refused without reading (or mapping more than) the file.
  auto msg = error_of([&] { SafetensorsFile(write_safetensors_raw(tmp / "a.safetensors", "{}", 0, uint64_t(1) << 40)); });
  EXPECT_CONTAINS(msg, "header length");
  EXPECT_CONTAINS(msg, "absurd");
  // Longer than the file itself (but under the bound): truncated.
  msg = error_of([&] { SafetensorsFile(write_safetensors_raw(tmp / "b.safetensors", "{}", 0, 4096)); });
  EXPECT_CONTAINS(msg, "truncated");
}

TEST(Limits, SafetensorsOffsetsMustLieInsideTheFile) {
  TempDir tmp;
  auto p = write_safetensors_raw(tmp / "a.safetensors",
                                 R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8);
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(p); }), "outside the file");
  // Offsets near 2^64, whose sum or difference would wrap.
  p = write_safetensors_raw(tmp / "b.safetensors",
                            R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [18446744073709551600, 16]}})", 16);
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(p); }), "outside the file");
  p = write_safetensors_raw(tmp / "c.safetensors",
                            R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 18446744073709551615]}})", 16);
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(p); }), "outside the file");
}

TEST(Limits, SafetensorsShapeProductMustNotOverflow) {
  TempDir tmp;
  // 2^31 * 2^31 * 2^31 elements wraps a 64-bit product to a small number.
  auto p = write_safetensors_raw(
      tmp / "a.safetensors",
      R"({"w": {"dtype": "F32", "shape": [2147483648, 2147483648, 2147483648], "data_offsets": [0, 0]}})", 0);
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(p); }), "overflows");
  // A product that fits 64 bits but not x 4 bytes.
  p = write_safetensors_raw(tmp / "b.safetensors",
                            R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 2], "data_offsets": [0, 0]}})", 0);
  error_of([&] { SafetensorsFile f(p); });
  p = write_safetensors_raw(tmp / "c.safetensors",
                            R"({"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 0]}})", 0);
  EXPECT_CONTAINS(error_of([&] { SafetensorsFile f(p); }), "non-integer");
}

// ---- config.json: absurd model sizes ----------------------------------------------------

json golden_config() { return test::read_json(test::golden_checkpoint() / "config.json"); }

std::string config_error(const std::function<void(json& text_config)>& edit) {
  json j = golden_config();
  edit(j["text_config"]);
  return error_of([&] { parse_config(j, "config.json"); });
}

TEST(Limits, ConfigSizesAreBounded) {
  // hidden_size 10^12 (a 4 TB embedding row): refused by parse_config itself,
  // naming the key, instead of reaching anything that would size a buffer from it.
  for (const char* key : {"hidden_size", "intermediate_size", "vocab_size", "num_attention_heads", "head_dim",
                          "num_key_value_heads", "linear_num_key_heads", "linear_num_value_heads",
                          "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
                          "max_position_embeddings"}) {
    SCOPED_TRACE(key);
    EXPECT_CONTAINS(config_error([&](json& t) { t[key] = kTrillion; }), key);
  }
}

TEST(Limits, ConfigLayerCountIsBoundedBeforeLayersAreListed) {
  // full_attention_interval expands num_hidden_layers into a list: 10^12
  // layers must be refused before that loop, not after 10^12 push_backs.
  EXPECT_CONTAINS(config_error([](json& t) {
                    t.erase("layer_types");
                    t["num_hidden_layers"] = kTrillion;
                  }),
                  "num_hidden_layers");
  EXPECT_CONTAINS(config_error([](json& t) { t["num_hidden_layers"] = kTrillion; }), "num_hidden_layers");
}

TEST(Limits, ConfigProductsCannotOverflow) {
  // Each value alone under the bound, but heads x head_dim x 2 past 2^63 if
  // the bound were loose: the tensor table of Checkpoint::open must be computable.
  json j = golden_config();
  j["text_config"]["num_attention_heads"] = int64_t(1) << 24;
  j["text_config"]["num_key_value_heads"] = int64_t(1) << 24;
  j["text_config"]["head_dim"] = int64_t(1) << 24;
  j["text_config"]["hidden_size"] = int64_t(1) << 24;
  ModelConfig cfg;
  try {
    cfg = parse_config(j, "config.json");
  } catch (const Error&) {
    return;  // refused up front: fine
  }
  // Accepted: then computing the expected shapes must be well-defined (UBSan checks).
  for (const auto& spec : qwen35_tensor_specs(cfg))
    for (int64_t d : spec.shape) EXPECT_GT(d, 0) << spec.name;
}

TEST(Limits, CheckpointWithAbsurdConfigFailsWithoutAllocating) {
  TempDir tmp;
  auto ck = tmp / "ck";
  test::copy_golden(ck);
  json j = golden_config();
  j["text_config"]["hidden_size"] = kTrillion;
  test::write_text(ck / "config.json", j.dump());
  EXPECT_CONTAINS(error_of([&] { Checkpoint::open(ck); }), "hidden_size");
}

// ---- build --context-length ------------------------------------------------------------

size_t entries(const fs::path& dir) { return size_t(std::distance(fs::directory_iterator(dir), {})); }

TEST(Limits, BuildContextLengthIsBounded) {
  TempDir tmp;
  fs::create_directories(tmp / "out");
  // 10^12 rows of rotary cos/sin cache would be terabytes: refused before the checkpoint is read.
  auto r = run_cli_limited({"build", "--checkpoint", test::golden_checkpoint().string(), "--out",
                            (tmp / "out" / "model").string(), "--context-length", std::to_string(kTrillion)});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_CONTAINS(r.err, "--context-length");
  EXPECT_EQ(entries(tmp / "out"), 0u) << "output left behind";
  r = run_cli_limited({"build", "--checkpoint", test::golden_checkpoint().string(), "--out",
                       (tmp / "out" / "model").string(), "--context-length", "9223372036854775807"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_CONTAINS(r.err, "--context-length");
  EXPECT_EQ(entries(tmp / "out"), 0u) << "output left behind";
}

TEST(Limits, BuildContextLengthFromConfigIsBounded) {
  // No flag: the context length comes from max_position_embeddings. A config
  // asking for 2^24 positions (under the config bound) with the real weights
  // still must not size the rotary cache from it unchecked.
  TempDir tmp;
  auto ck = tmp / "ck";
  test::copy_golden(ck);
  json j = golden_config();
  j["text_config"]["max_position_embeddings"] = int64_t(1) << 24;
  test::write_text(ck / "config.json", j.dump());
  fs::create_directories(tmp / "out");
  auto r = run_cli_limited({"build", "--checkpoint", ck.string(), "--out", (tmp / "out" / "model").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_CONTAINS(r.err, "context");
  EXPECT_CONTAINS(r.err, "--context-length");
  EXPECT_EQ(entries(tmp / "out"), 0u) << "output left behind";
}

// ---- generate: max new tokens, maximum length -----------------------------------------

TEST(Limits, GenerateMaxNewTokensIsBounded) {
  const std::string model = test::golden_model_dir().string();
  for (const std::string n : {std::to_string(kTrillion), std::string("9223372036854775807")}) {
    SCOPED_TRACE(n);
    auto r = run_cli_limited({"generate", "--model", model, "--ids", "5,17", "--max-new-tokens", n});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_CONTAINS(r.err, "context");
  }
  // The library check, with a prompt so that prompt + new tokens would wrap int64.
  const std::vector<int64_t> prompt = {5, 17};
  EXPECT_CONTAINS(error_of([&] {
                    check_request(test::golden_runtime_model(), prompt, std::numeric_limits<int64_t>::max());
                  }),
                  "context");
}

TEST(Limits, GeneratorMaxLengthIsBounded) {
  // The state is allocated at max_length: more than the context is refused.
  EXPECT_CONTAINS(error_of([&] { Generator g(test::golden_runtime_model(), 1, kTrillion); }), "context length");
  EXPECT_CONTAINS(error_of([&] { Generator g(test::golden_runtime_model(), kTrillion, 16); }), "batch");
}

// ---- .npy, snapshots, ONNX external data, tokenizer ids -------------------------------

std::string npy_file(const std::string& dict, size_t payload) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  const uint16_t n = uint16_t(header.size());
  return std::string("\x93NUMPY\x01\x00", 8) + std::string(reinterpret_cast<const char*>(&n), 2) + header +
         std::string(payload, '\0');
}

TEST(Limits, NpyShapeIsCheckedAgainstTheFileSize) {
  TempDir tmp;
  // 10^12 floats announced, 16 bytes present: refused before allocating 4 TB.
  test::write_text(tmp / "a.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }", 16));
  error_of([&] { read_npy(tmp / "a.npy"); });
  // A product that wraps 64 bits, a negative dimension, a non-number.
  test::write_text(tmp / "b.npy",
                   npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", 16));
  error_of([&] { read_npy(tmp / "b.npy"); });
  test::write_text(tmp / "c.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", 16));
  error_of([&] { read_npy(tmp / "c.npy"); });
  test::write_text(tmp / "d.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }", 16));
  error_of([&] { read_npy(tmp / "d.npy"); });
  test::write_text(tmp / "e.npy", npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 16));
  error_of([&] { read_npy(tmp / "e.npy"); });
}

TEST(Limits, SnapshotCountsAreBoundedBeforeAllocation) {
  // Header: magic, version 1, reserved, vocab 512, length 0, token_count 2^40, 0 caches.
  std::string bytes = std::string("DGSTATE\0", 8);
  auto u32 = [&](uint32_t v) { bytes.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { bytes.append(reinterpret_cast<const char*>(&v), 8); };
  u32(1), u32(0), u64(512), u64(0), u64(uint64_t(1) << 40), u32(0);
  auto parse = [&] { parse_snapshot(std::as_bytes(std::span(bytes.data(), bytes.size())), "s.dgstate"); };
  EXPECT_CONTAINS(error_of(parse), "s.dgstate");
  // A plausible token count that the file does not hold.
  bytes = std::string("DGSTATE\0", 8);
  u32(1), u32(0), u64(512), u64(0), u64(uint64_t(1) << 31), u32(0);
  EXPECT_CONTAINS(error_of(parse), "truncated");
  // One cache whose dimensions multiply past 2^64.
  bytes = std::string("DGSTATE\0", 8);
  u32(1), u32(0), u64(512), u64(0), u64(0), u32(1);
  u32(0), u32(2), u32(1), u32(4);
  for (int i = 0; i < 4; ++i) u64(uint64_t(1) << 32);
  u64(0);
  EXPECT_CONTAINS(error_of(parse), "s.dgstate");
}

TEST(Limits, OnnxExternalDataRangesCannotOverflow) {
  TempDir tmp;
  onnx::ModelProto m;
  m.set_ir_version(10);
  m.add_opset_import()->set_version(21);
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto_DataType_FLOAT);
  t->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "model.onnx.data");
  kv("offset", "9223372036854775807");
  kv("length", "16");
  std::string bytes;
  m.SerializeToString(&bytes);
  test::write_text(tmp / "model.onnx", bytes);
  test::write_text(tmp / "model.onnx.data", std::string(64, '\0'));
  EXPECT_CONTAINS(error_of([&] { graph::summarize_model(tmp / "model.onnx"); }), "model.onnx");
}

TEST(Limits, TokenizerIdsAreBounded) {
  // A vocabulary entry with id 2^31 - 1 would size the id table at 2^31 entries.
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[test::byte_level_char(b)] = b;
  vocab["huge"] = 2147483647;
  json tok = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
              {"pre_tokenizer", {{"type", "ByteLevel"}}},
              {"decoder", {{"type", "ByteLevel"}}}};
  EXPECT_CONTAINS(error_of([&] { Tokenizer::from_json(tok.dump()); }), "tokenizer.json");
  // The same through added_tokens.
  vocab.erase("huge");
  tok["model"]["vocab"] = vocab;
  tok["added_tokens"] = json::array({{{"id", 9223372036854775807}, {"content", "<x>"}, {"special", true}}});
  EXPECT_CONTAINS(error_of([&] { Tokenizer::from_json(tok.dump()); }), "tokenizer.json");
}

}  // namespace
}  // namespace deltagen
