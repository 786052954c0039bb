// deltagen.MatMulNBits inside ONNX Runtime (src/ortext): the load-time
// rewrite, the custom op against ORT's own com.microsoft.MatMulNBits on the
// same model file, and a whole int4 model on the fast kernels vs stock ORT.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul_nbits_reference.h"
#include "models/build.h"
#include "ortext/deltagen_ops.h"
#include "ortext/fast_session.h"
#include "ortext/released_weights.h"
#include "graph/matmul_nbits_model.h"
#include "rewrite/model_rewrite.h"
#include "rewrite/weight_reshapes.h"
#include "runtime/session.h"
#include "test_util.h"
#include "kernel_levels.h"

namespace deltagen::ortext {
namespace {

using test::TempDir;
using graph::matmul_nbits_model;
using graph::MatMulNBitsNode;
using graph::save_with_external_data;
using rewrite::RewriteOptions;
using rewrite::RewriteSummary;
using rewrite::use_deltagen_kernels;
namespace fs = std::filesystem;

struct RandomWeights {
  kernels::NBitsShape shape;
  std::vector<uint8_t> data, zero_points;
  std::vector<float> scales;

  RandomWeights(int64_t n, int64_t k, int block_size, bool asymmetric, std::mt19937& rng) {
    shape = {n, k, 4, block_size};
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> mag(0.5f, 1.5f);
    data.resize(size_t(n * shape.k_blocks() * shape.file_block_bytes()));
    for (auto& b : data) b = uint8_t(byte(rng));
    scales.resize(size_t(n * shape.k_blocks()));
    for (auto& s : scales) s = 0.05f * mag(rng) * (byte(rng) & 1 ? 1.0f : -1.0f);
    if (asymmetric) {
      zero_points.resize(size_t(n * shape.zero_point_row_bytes()));
      for (auto& z : zero_points) z = uint8_t(byte(rng));
    }
  }
  kernels::NBitsWeightsView view() const {
    return {shape, data.data(), scales.data(), zero_points.empty() ? nullptr : zero_points.data()};
  }
};

// Writes `model` to `path` (a test model file) and returns the path.
fs::path write_model(const onnx::ModelProto& model, const fs::path& path) {
  std::ofstream out(path, std::ios::binary);
  EXPECT_TRUE(model.SerializeToOstream(&out) && out.flush()) << path;
  return path;
}

std::vector<float> random_activations(int64_t m, int64_t k, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(size_t(m * k));
  for (auto& x : a) x = dist(rng);
  return a;
}

Ort::SessionOptions session_options(int threads) {
  Ort::SessionOptions o;
  o.SetIntraOpNumThreads(threads);
  o.SetGraphOptimizationLevel(GraphOptimizationLevel::ORT_ENABLE_ALL);
  return o;
}

// Runs A [m, k] through every output of a MatMulNBits test model.
std::vector<std::vector<float>> run(Ort::Session& session, const std::vector<float>& a, int64_t m, int64_t k) {
  const auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  const std::vector<int64_t> dims = {m, k};
  Ort::Value input = Ort::Value::CreateTensor<float>(mem, const_cast<float*>(a.data()), a.size(), dims.data(), 2);
  const char* input_name = "A";
  std::vector<std::string> names = session.GetOutputNames();
  std::vector<const char*> output_names;
  for (const auto& n : names) output_names.push_back(n.c_str());
  auto outputs = session.Run(Ort::RunOptions{nullptr}, &input_name, &input, 1, output_names.data(), output_names.size());
  std::vector<std::vector<float>> result;
  for (auto& v : outputs) {
    const float* p = v.GetTensorData<float>();
    result.emplace_back(p, p + v.GetTensorTypeAndShapeInfo().GetElementCount());
  }
  return result;
}

// Σ_k |a w| per output: error bounds are relative to it.
std::vector<double> magnitudes(const kernels::NBitsWeightsView& w, const std::vector<float>& a, int64_t m) {
  const std::vector<float> deq = kernels::dequantize_reference(w);
  const int64_t n = w.shape.n, k = w.shape.k;
  std::vector<double> mag(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t kk = 0; kk < k; ++kk) s += std::fabs(double(a[size_t(i * k + kk)]) * deq[size_t(j * k + kk)]);
      mag[size_t(i * n + j)] = s;
    }
  return mag;
}

double worst_relative(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& mag) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (mag[i] + 1e-30));
  return worst;
}

TEST(OrtextRewrite, SwitchesOnlyTheNodesTheKernelSupports) {
  std::mt19937 rng(1);
  RandomWeights sym(20, 64, 32, false, rng), asym(20, 64, 64, true, rng);
  onnx::ModelProto model = matmul_nbits_model({{sym.view()}, {sym.view()}, {asym.view()}, {sym.view()}}, 4);
  auto* nodes = model.mutable_graph()->mutable_node();
  for (auto& attr : *(*nodes)[1].mutable_attribute())
    if (attr.name() == "accuracy_level") attr.set_i(0);
  for (auto& attr : *(*nodes)[3].mutable_attribute())
    if (attr.name() == "bits") attr.set_i(8);

  const RewriteSummary summary = use_deltagen_kernels(model);
  EXPECT_EQ(summary.matmul_nbits, 4);
  EXPECT_EQ(summary.rewritten, 2);
  EXPECT_EQ(summary.kept, (std::map<std::string, int64_t>{{"accuracy_level=0", 1}, {"bits=8", 1}}));
  EXPECT_EQ(model.graph().node(0).domain(), kDeltagenDomain);
  EXPECT_EQ(model.graph().node(1).domain(), "com.microsoft");
  EXPECT_EQ(model.graph().node(2).domain(), kDeltagenDomain);
  bool imported = false;
  for (const auto& op : model.opset_import()) imported |= op.domain() == kDeltagenDomain;
  EXPECT_TRUE(imported);

  RewriteOptions any;
  any.any_accuracy_level = true;
  EXPECT_EQ(use_deltagen_kernels(model, any).rewritten, 1);  // node 1 now; node 3 never (bits 8)
}

// A Reshape of a file weight by a constant shape becomes a second initializer
// over the same bytes; the original goes when nothing else reads it, and so
// does the shape's Constant. An inline weight is left alone.
TEST(OrtextRewrite, ReshapeOfAFileWeightIsReadInPlace) {
  auto graph_with = [](bool external, bool second_reader) {
    onnx::GraphProto g;
    onnx::TensorProto* w = g.add_initializer();
    w->set_name("table");
    w->set_data_type(onnx::TensorProto_DataType_UINT8);
    for (int64_t d : {4, 2, 8}) w->add_dims(d);
    if (external) {
      w->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
      for (auto [k, v] : {std::pair{"location", "model.onnx.data"}, {"offset", "4096"}, {"length", "64"}}) {
        auto* e = w->add_external_data();
        e->set_key(k);
        e->set_value(v);
      }
    } else {
      w->set_raw_data(std::string(64, '\1'));
    }
    onnx::NodeProto* c = g.add_node();
    c->set_op_type("Constant");
    c->add_output("shape");
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto_DataType_INT64);
    a->mutable_t()->add_dims(2);
    a->mutable_t()->add_int64_data(4);
    a->mutable_t()->add_int64_data(-1);
    onnx::NodeProto* r = g.add_node();
    r->set_op_type("Reshape");
    r->add_input("table");
    r->add_input("shape");
    r->add_output("rows");
    onnx::NodeProto* gather = g.add_node();
    gather->set_op_type("Gather");
    gather->add_input("rows");
    gather->add_input("ids");
    gather->add_output("y");
    if (second_reader) {
      onnx::NodeProto* id = g.add_node();
      id->set_op_type("Identity");
      id->add_input("table");
      id->add_output("t2");
    }
    return g;
  };
  onnx::GraphProto g = graph_with(true, false);
  EXPECT_EQ(rewrite::alias_reshaped_weights(g), 1);
  ASSERT_EQ(g.node_size(), 1);  // the Gather alone
  EXPECT_EQ(g.node(0).op_type(), "Gather");
  ASSERT_EQ(g.initializer_size(), 1);
  EXPECT_EQ(g.initializer(0).name(), "rows");
  EXPECT_EQ(std::vector<int64_t>(g.initializer(0).dims().begin(), g.initializer(0).dims().end()),
            (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(g.initializer(0).external_data(1).value(), "4096");

  g = graph_with(true, true);
  EXPECT_EQ(rewrite::alias_reshaped_weights(g), 1);
  EXPECT_EQ(g.initializer_size(), 2);  // the Identity still reads the original

  g = graph_with(false, false);
  EXPECT_EQ(rewrite::alias_reshaped_weights(g), 0);
  EXPECT_EQ(g.node_size(), 3);
}

TEST(OrtextRewrite, WeightsThatAreGraphInputsStayOnOrt) {
  std::mt19937 rng(2);
  RandomWeights w(20, 64, 32, false, rng);
  onnx::ModelProto model = matmul_nbits_model({{w.view()}}, 4);
  auto* in = model.mutable_graph()->add_input();
  in->set_name("B0");  // overridable initializer
  EXPECT_EQ(use_deltagen_kernels(model).kept.at("weights not constant"), 1);
}

// The custom op against ORT's own kernel on the same file, every block size,
// symmetric and asymmetric, accuracy levels 0 and 4, decode and prefill rows.
TEST(OrtextFastSession, MatchesOrtMatMulNBits) {
  std::mt19937 rng(42);
  TempDir dir;
  RewriteOptions any;
  any.any_accuracy_level = true;
  struct Case {
    int64_t n, k;
  };
  const std::vector<Case> cases = {{45, 257}, {64, 512}};
  double worst_vs_exact = 0, worst_vs_acc4 = 0;
  for (int bs : {16, 32, 64, 128, 256})
    for (bool asym : {false, true})
      for (const Case& c : cases) {
        RandomWeights w(c.n, c.k, bs, asym, rng);
        for (int64_t level : {0, 4}) {
          const fs::path path =
              write_model(matmul_nbits_model({{w.view()}}, level), dir / ("m" + std::to_string(level) + ".onnx"));
          Ort::Session stock(ort_env(), path.c_str(), session_options(1));
          RewriteSummary summary;
          Ort::Session fast = create_session_with_fast_kernels(ort_env(), path, session_options(1), &summary, any);
          ASSERT_EQ(summary.rewritten, 1);
          for (int64_t m : {1, 3, 37}) {
            SCOPED_TRACE("bs=" + std::to_string(bs) + (asym ? " asym" : " sym") + " N=" + std::to_string(c.n) +
                         " K=" + std::to_string(c.k) + " level=" + std::to_string(level) + " M=" + std::to_string(m));
            const auto a = random_activations(m, c.k, rng);
            const auto want = run(stock, a, m, c.k)[0];
            const auto got = run(fast, a, m, c.k)[0];
            const double rel = worst_relative(got, want, magnitudes(w.view(), a, m));
            // ORT's level 0 is exact fp32; level 4 quantizes A to int8 itself
            // (differently), so its distance adds to ours.
            (level == 0 ? worst_vs_exact : worst_vs_acc4) = std::max(level == 0 ? worst_vs_exact : worst_vs_acc4, rel);
            EXPECT_LT(rel, level == 0 ? 4e-3 : 8e-3);
          }
        }
      }
  std::printf("[ measured ] worst |fast - ORT| / sum|a*w|: vs accuracy_level 0 %.2e, vs accuracy_level 4 %.2e\n",
              worst_vs_exact, worst_vs_acc4);
}

// Every kernel family this CPU has, selected through the session config.
TEST(OrtextFastSession, EveryKernelLevelThroughSessionConfig) {
  const test::LevelsUnderTest levels{kernels::KernelLevel::Scalar, kernels::KernelLevel::Avx2,
                                     kernels::KernelLevel::Avx512, kernels::KernelLevel::Amx};
  std::mt19937 rng(3);
  TempDir dir;
  RandomWeights w(100, 200, 32, true, rng);
  const fs::path path = write_model(matmul_nbits_model({{w.view()}}, 4), dir / "m.onnx");
  Ort::Session stock(ort_env(), path.c_str(), session_options(1));
  for (auto level : levels.runnable) {
    Ort::SessionOptions options = session_options(2);
    options.AddConfigEntry(kConfigMaxLevel, kernels::level_name(level));
    options.AddConfigEntry(kConfigAmxMinRows, "4");
    Ort::Session fast = create_session_with_fast_kernels(ort_env(), path, options);
    for (int64_t m : {1, 20}) {
      const auto a = random_activations(m, 200, rng);
      EXPECT_LT(worst_relative(run(fast, a, m, 200)[0], run(stock, a, m, 200)[0], magnitudes(w.view(), a, m)), 8e-3)
          << kernels::level_name(level) << " m=" << m;
    }
  }
  SKIP_LEVELS_THIS_CPU_LACKS(levels);
}

// The memory and prefetch switches reach the kernel: every combination gives
// the default session's bits, and a malformed value fails session creation.
TEST(OrtextFastSession, MemoryAndPrefetchSwitchesChangeNoResult) {
  std::mt19937 rng(5);
  TempDir dir;
  RandomWeights w(100, 200, 32, false, rng);
  const fs::path path = write_model(matmul_nbits_model({{w.view()}}, 4), dir / "m.onnx");
  const auto a = random_activations(1, 200, rng);
  Ort::Session plain = create_session_with_fast_kernels(ort_env(), path, session_options(1));
  const std::vector<float> want = run(plain, a, 1, 200)[0];
  for (const char* pages : {"0", "1"})
    for (const char* prefetch : {"l1:4096", "l2:0", "l2:65536"}) {
      Ort::SessionOptions options = session_options(1);
      options.AddConfigEntry(kConfigHugePages, pages);
      options.AddConfigEntry(kConfigPrefetch, prefetch);
      Ort::Session s = create_session_with_fast_kernels(ort_env(), path, options);
      EXPECT_EQ(run(s, a, 1, 200)[0], want) << pages << " " << prefetch;
    }
  Ort::SessionOptions bad = session_options(1);
  bad.AddConfigEntry(kConfigPrefetch, "l3:64");
  try {
    create_session_with_fast_kernels(ort_env(), path, bad);
    ADD_FAILURE() << "a malformed prefetch setting was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("deltagen.matmul.prefetch"), std::string::npos) << e.what();
  }
}

TEST(OrtextFastSession, FindsExternalDataNextToTheModel) {
  std::mt19937 rng(4);
  TempDir dir;
  RandomWeights w1(48, 96, 32, false, rng), w2(30, 96, 16, true, rng);
  const onnx::ModelProto model = matmul_nbits_model({{w1.view()}, {w2.view()}}, 4);
  fs::create_directories(dir / "inline");
  fs::create_directories(dir / "external");
  write_model(model, dir / "inline" / "model.onnx");
  save_with_external_data(model, dir / "external" / "model.onnx");
  ASSERT_TRUE(fs::exists(dir / "external" / "model.onnx.data"));
  Ort::Session a = create_session_with_fast_kernels(ort_env(), dir / "inline" / "model.onnx", session_options(1));
  RewriteSummary summary;
  Ort::Session b = create_session_with_fast_kernels(ort_env(), dir / "external" / "model.onnx", session_options(1), &summary);
  EXPECT_EQ(summary.rewritten, 2);
  const auto x = random_activations(5, 96, rng);
  EXPECT_EQ(run(a, x, 5, 96), run(b, x, 5, 96));
}

// Pages of a file mapping are dropped (and read again from the file when
// touched); anonymous memory is never released: dropping it would zero it.
TEST(ReleasedWeights, DropsFileMappedPagesOnly) {
  TempDir dir;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE)), bytes = 64 * page;
  std::vector<char> pattern(bytes);
  for (size_t i = 0; i < bytes; ++i) pattern[i] = char(i * 7 + 3);
  std::ofstream(dir / "w.bin", std::ios::binary).write(pattern.data(), std::streamsize(bytes));
  const int fd = ::open((dir / "w.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(map, MAP_FAILED);
  const char* p = static_cast<const char*>(map);
  long sum = 0;
  for (size_t i = 0; i < bytes; i += page) sum += p[i];  // fault every page in
  EXPECT_EQ(release_mapped_weight(p + 100, bytes - 200), bytes - 2 * page);  // whole pages inside only
  EXPECT_EQ(std::memcmp(p, pattern.data(), bytes), 0) << "released pages read back from the file";
  ::munmap(map, bytes);
  std::vector<char> heap(bytes, 'x');
  EXPECT_EQ(release_mapped_weight(heap.data(), heap.size()), 0u);
  EXPECT_EQ(heap[bytes / 2], 'x');
  EXPECT_GT(sum, -1000000);
}

TEST(OrtextFastSession, IntraOpThreadsChangeNothing) {
  std::mt19937 rng(5);
  TempDir dir;
  RandomWeights w(3000, 128, 32, false, rng);
  const fs::path path = write_model(matmul_nbits_model({{w.view()}}, 4), dir / "m.onnx");
  Ort::Session one = create_session_with_fast_kernels(ort_env(), path, session_options(1));
  Ort::Session two = create_session_with_fast_kernels(ort_env(), path, session_options(2));
  for (int64_t m : {1, 50}) {
    const auto a = random_activations(m, 128, rng);
    EXPECT_EQ(run(one, a, m, 128), run(two, a, m, 128)) << "m=" << m;
  }
}

TEST(OrtextFastSession, BiasAndBatchedShapes) {
  std::mt19937 rng(6);
  TempDir dir;
  RandomWeights w(24, 40, 16, false, rng);
  std::vector<float> bias(24);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = float(i);
  const fs::path path = write_model(matmul_nbits_model({{w.view(), bias.data()}}, 4), dir / "m.onnx");
  Ort::Session stock(ort_env(), path.c_str(), session_options(1));
  Ort::Session fast = create_session_with_fast_kernels(ort_env(), path, session_options(1));
  const auto a = random_activations(4, 40, rng);
  const auto want = run(stock, a, 4, 40)[0], got = run(fast, a, 4, 40)[0];
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 0.02) << i;
}

// ---- the whole model: golden checkpoint built to int4, fast vs stock kernels ----

struct Forward {
  std::vector<float> logits;  // [S, V]
  std::map<std::string, Ort::Value> present;
};

// One forward pass: `tokens` after `past` (empty map = start), as the runtime feeds it.
Forward forward(Ort::Session& session, const ModelIo& io, const std::vector<int64_t>& tokens, int64_t past_len,
                std::map<std::string, Ort::Value>& past) {
  const auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  const int64_t s = int64_t(tokens.size());
  std::vector<int64_t> ids = tokens, mask(static_cast<size_t>(past_len + s), 1), pos(static_cast<size_t>(s));
  for (int64_t i = 0; i < s; ++i) pos[size_t(i)] = past_len + i;
  std::vector<std::string> names;
  std::vector<Ort::Value> values;
  const std::vector<int64_t> ids_dims = {1, s}, mask_dims = {1, past_len + s};
  names.push_back("input_ids");
  values.push_back(Ort::Value::CreateTensor<int64_t>(mem, ids.data(), ids.size(), ids_dims.data(), 2));
  if (io.has_attention_mask) {
    names.push_back("attention_mask");
    values.push_back(Ort::Value::CreateTensor<int64_t>(mem, mask.data(), mask.size(), mask_dims.data(), 2));
  }
  if (io.has_position_ids) {
    names.push_back("position_ids");
    values.push_back(Ort::Value::CreateTensor<int64_t>(mem, pos.data(), pos.size(), ids_dims.data(), 2));
  }
  Ort::AllocatorWithDefaultOptions alloc;
  for (const CacheSpec& c : io.caches) {
    names.push_back(c.input_name);
    auto it = past.find(c.input_name);
    if (it != past.end()) {
      values.push_back(std::move(it->second));
      continue;
    }
    std::vector<int64_t> dims = c.shape;
    dims[0] = 1;
    if (c.kind == CacheKind::Key || c.kind == CacheKind::Value) dims[2] = 0;
    Ort::Value v = Ort::Value::CreateTensor(alloc, dims.data(), dims.size(), c.dtype);
    const size_t bytes = v.GetTensorTypeAndShapeInfo().GetElementCount() * (c.dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ? 4 : 2);
    if (bytes) std::memset(v.GetTensorMutableRawData(), 0, bytes);
    values.push_back(std::move(v));
  }
  std::vector<const char*> in_names, out_names;
  for (const auto& n : names) in_names.push_back(n.c_str());
  std::vector<std::string> outs = {"logits"};
  for (const CacheSpec& c : io.caches) outs.push_back(c.output_name);
  for (const auto& n : outs) out_names.push_back(n.c_str());
  auto results = session.Run(Ort::RunOptions{nullptr}, in_names.data(), values.data(), values.size(), out_names.data(),
                             out_names.size());
  Forward f;
  const float* p = results[0].GetTensorData<float>();
  f.logits.assign(p, p + results[0].GetTensorTypeAndShapeInfo().GetElementCount());
  for (size_t i = 0; i < io.caches.size(); ++i) f.present.emplace(io.caches[i].input_name, std::move(results[i + 1]));
  return f;
}

int64_t argmax_last(const std::vector<float>& logits, int64_t vocab) {
  const float* row = logits.data() + logits.size() - size_t(vocab);
  return std::max_element(row, row + vocab) - row;
}

// The golden checkpoint built to int4 twice: accuracy_level 4 (the default,
// what the fast kernels take) and accuracy_level 0 (same int4 weights, ORT
// computes in fp32: the reference). All three sessions read the same tokens
// (the reference's greedy choices), so their logits compare position by
// position; the fast kernels must stay as close to the reference as ORT's own
// int8 path does.
TEST(OrtextFullModel, Int4GoldenModelOnFastKernelsAgreesWithStockOrt) {
  TempDir dir;
  BuildOptions opts;
  opts.precision = Precision::Int4;
  opts.block_size = 16;  // the golden model's K=64 holds only two 32-blocks
  opts.show_progress = false;
  auto ckpt = Checkpoint::open(test::golden_checkpoint());
  build_model(*ckpt, opts, dir / "acc4");
  opts.accuracy_level = 0;
  build_model(*ckpt, opts, dir / "acc0");

  Ort::SessionOptions options = session_options(2);
  options.AddConfigEntry(kConfigAmxMinRows, "8");  // the 20-token prompt takes the prefill path
  Ort::Session exact((ort_env()), (dir / "acc0" / "model.onnx").c_str(), options);
  Ort::Session stock4((ort_env()), (dir / "acc4" / "model.onnx").c_str(), options);
  RewriteSummary summary;
  Ort::Session fast = create_session_with_fast_kernels(ort_env(), dir / "acc4" / "model.onnx", options, &summary);
  EXPECT_GT(summary.rewritten, 0);
  EXPECT_EQ(summary.rewritten, summary.matmul_nbits) << "every MatMulNBits of an int4 build should move";
  const ModelIo io = describe_model_io(exact);
  const int64_t vocab = io.logits_vocab;
  ASSERT_GT(vocab, 0);

  std::vector<int64_t> tokens;
  for (int i = 0; i < 20; ++i) tokens.push_back((i * 37 + 11) % vocab);
  std::map<std::string, Ort::Value> past_exact, past_stock4, past_fast;
  int64_t past_len = 0;
  double diff_fast = 0, diff_stock4 = 0, max_logit = 0;
  int agree_fast = 0, agree_stock4 = 0, steps = 0;
  for (int step = 0; step < 9; ++step) {
    Forward e = forward(exact, io, tokens, past_len, past_exact);
    Forward s4 = forward(stock4, io, tokens, past_len, past_stock4);
    Forward f = forward(fast, io, tokens, past_len, past_fast);
    for (size_t i = 0; i < e.logits.size(); ++i) {
      diff_fast = std::max(diff_fast, double(std::fabs(f.logits[i] - e.logits[i])));
      diff_stock4 = std::max(diff_stock4, double(std::fabs(s4.logits[i] - e.logits[i])));
      max_logit = std::max(max_logit, double(std::fabs(e.logits[i])));
    }
    const int64_t next = argmax_last(e.logits, vocab);
    agree_fast += argmax_last(f.logits, vocab) == next;
    agree_stock4 += argmax_last(s4.logits, vocab) == next;
    ++steps;
    past_len += int64_t(tokens.size());
    tokens = {next};
    past_exact = std::move(e.present);
    past_stock4 = std::move(s4.present);
    past_fast = std::move(f.present);
  }
  std::printf("[ measured ] int4 golden model vs ORT accuracy_level 0 (max |logit| %.3g): deltagen kernels max |dlogit| "
              "%.3g, greedy %d/%d; ORT accuracy_level 4 max |dlogit| %.3g, greedy %d/%d\n",
              max_logit, diff_fast, agree_fast, steps, diff_stock4, agree_stock4, steps);
  EXPECT_LT(diff_fast, 2.0 * diff_stock4 + 1e-3 * max_logit);
  EXPECT_GE(agree_fast, std::min(agree_stock4, steps - 1));
}

// An int4 build with every weight in model.onnx.data: released originals
// and the embedding's Reshape of the lm_head's table read in place from the
// file (the default) give the same logits as the plain load, and every
// MatMulNBits node may release (the lm_head's table too: the tied embedding
// only gathers rows).
TEST(OrtextFullModel, ReleasingPackedWeightsChangesNoResult) {
  TempDir dir;
  BuildOptions opts;
  opts.precision = Precision::Int4;
  opts.block_size = 16;
  opts.external_data_threshold = 0;
  opts.show_progress = false;
  build_model(*Checkpoint::open(test::golden_checkpoint()), opts, dir / "m");
  const fs::path path = dir / "m" / "model.onnx";
  RewriteSummary released, kept;
  Ort::Session a = create_session_with_fast_kernels(ort_env(), path, session_options(1), &released);
  Ort::Session b = create_session_with_fast_kernels(ort_env(), path, session_options(1), &kept,
                                                    RewriteOptions{.release_weights = false});
  EXPECT_EQ(released.released, released.rewritten);
  EXPECT_EQ(released.aliased_reshapes, 1);  // the embedding's view of the lm_head's table
  EXPECT_EQ(kept.released, 0);
  EXPECT_EQ(kept.aliased_reshapes, 0);
  // The session config switch (bench --session-config deltagen.release_weights=0) does the same.
  Ort::SessionOptions keep = session_options(1);
  keep.AddConfigEntry(kConfigReleaseWeights, "0");
  RewriteSummary switched;
  create_session_with_fast_kernels(ort_env(), path, keep, &switched);
  EXPECT_EQ(switched.released, 0);
  const ModelIo io = describe_model_io(a);
  std::map<std::string, Ort::Value> past_a, past_b;
  const std::vector<int64_t> tokens = {5, 17, 300, 42, 7, 99, 123};
  Forward fa = forward(a, io, tokens, 0, past_a), fb = forward(b, io, tokens, 0, past_b);
  EXPECT_EQ(fa.logits, fb.logits);
}

}  // namespace
}  // namespace deltagen::ortext
