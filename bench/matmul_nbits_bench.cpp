// MatMulNBits microbenchmark: ONNX Runtime's com.microsoft.MatMulNBits vs
// deltagen's kernel, on the Qwen3.5-0.8B projection shapes (int4, block 32,
// symmetric, accuracy_level 4), M = 1 (decode) and M = 1000 (prefill), 1 and 2
// threads. Three implementations per row:
//   ort     stock ORT session of a MatMulNBits-only model;
//   op      the same model file through ortext::create_session_with_fast_kernels
//           (deltagen.MatMulNBits on ORT's intra-op pool: what the runtime gets);
//   kernel  kernels::matmul_nbits directly, on kernels::ThreadPool.
// M = 1 runs a graph of R nodes over distinct weights, R chosen so one pass
// streams >= --stream-mb MB: every node reads its weights from DRAM, as in a
// decode step. M = 1000 runs one node (weights reused from cache).
// GB/s counts the weights in the ONNX file format (int4 + fp32 scales, 0.625
// B/weight) for every implementation; GFLOP/s = 2*M*N*K / time. "busy%" is CPU
// time used by other processes during the row (from /proc/stat): rows above
// ~15% are noisy.
//
// The three are timed in turns, run by run (see time_alternating).
//
// Usage: matmul_nbits_bench [--threads 1,2] [--m 1,1000] [--shapes K:N,...]
//                           [--impl ort,op,kernel] [--min-time 1.0] [--stream-mb 320]
//                           [--max-level scalar|avx2|avx512|amx] [--amx-min-rows M] [--block-size 32]
//                           [--avx-vnni 0|1]
// Run under `flock /tmp/deltagen-bench.lock` on a shared machine.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "kernels/cpu_features.h"
#include "kernels/matmul_nbits.h"
#include "kernels/packed_weights.h"
#include "kernels/thread_pool.h"
#include "ortext/deltagen_ops.h"
#include "ortext/fast_session.h"
#include "graph/matmul_nbits_model.h"
#include "runtime/session.h"

namespace {

using namespace deltagen;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<int> threads = {1, 2};
  std::vector<int64_t> ms = {1, 1000};
  std::vector<std::pair<int64_t, int64_t>> shapes = {{1024, 6144}, {1024, 2048}, {1024, 3584}, {1024, 4096},
                                                     {1024, 512},  {1024, 248320}, {3584, 1024}, {2048, 1024}};
  std::vector<std::string> impls = {"ort", "op", "kernel"};
  double min_time = 1.0;
  int64_t stream_mb = 320;
  int block_size = 32;
  std::string max_level;  // cap for the op and kernel columns ("" = best)
  bool avx_vnni = true;   // --avx-vnni 0: the AVX2 level's tiles without AVX-VNNI
  int64_t amx_min_rows = 0;  // 0 = the kernel's default
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--threads") {
      o.threads.clear();
      for (auto& t : split(value, ',')) o.threads.push_back(std::stoi(t));
    } else if (flag == "--m") {
      o.ms.clear();
      for (auto& t : split(value, ',')) o.ms.push_back(std::stoll(t));
    } else if (flag == "--shapes") {
      o.shapes.clear();
      for (auto& t : split(value, ',')) {
        auto kn = split(t, ':');
        o.shapes.emplace_back(std::stoll(kn.at(0)), std::stoll(kn.at(1)));
      }
    } else if (flag == "--impl") {
      o.impls = split(value, ',');
    } else if (flag == "--min-time") {
      o.min_time = std::stod(value);
    } else if (flag == "--stream-mb") {
      o.stream_mb = std::stoll(value);
    } else if (flag == "--max-level") {
      o.max_level = value;
    } else if (flag == "--avx-vnni") {
      o.avx_vnni = value != "0";
    } else if (flag == "--amx-min-rows") {
      o.amx_min_rows = std::stoll(value);
    } else if (flag == "--block-size") {
      o.block_size = std::stoi(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  return o;
}

// Cheap deterministic random bytes (weights' values do not matter for speed).
struct XorShift {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
};

struct WeightSet {
  kernels::NBitsShape shape;
  std::vector<uint8_t> data;
  std::vector<float> scales;
  kernels::NBitsWeightsView view() const { return {shape, data.data(), scales.data(), nullptr}; }
};

WeightSet random_weights(int64_t k, int64_t n, int bs, uint64_t seed) {
  WeightSet w;
  w.shape = {n, k, 4, bs};
  XorShift rng{seed * 0x9E3779B97F4A7C15ull + 1};
  w.data.resize(size_t(n * w.shape.k_blocks() * w.shape.file_block_bytes()));
  for (size_t i = 0; i < w.data.size(); i += 8) {
    const uint64_t r = rng.next();
    std::memcpy(w.data.data() + i, &r, std::min<size_t>(8, w.data.size() - i));
  }
  w.scales.resize(size_t(n * w.shape.k_blocks()));
  for (auto& s : w.scales) s = (rng.next() & 1 ? 0.01f : -0.01f) * (0.5f + float(rng.next() % 1000) / 1000.0f);
  return w;
}

// CPU jiffies of all processes minus this one, to flag interference.
struct CpuMeter {
  static long long total_busy() {
    std::ifstream f("/proc/stat");
    std::string cpu;
    long long user, nice, sys, idle, iowait, irq, softirq, steal;
    f >> cpu >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal;
    return user + nice + sys + irq + softirq;
  }
  static long long own_busy() {
    std::ifstream f("/proc/self/stat");
    std::string line;
    std::getline(f, line);
    std::istringstream ss(line.substr(line.rfind(')') + 2));
    std::string field;
    long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && ss >> field; ++i) {
      if (i == 14) utime = std::stoll(field);
      if (i == 15) stime = std::stoll(field);
    }
    return utime + stime;
  }
  long long busy0 = total_busy(), own0 = own_busy();
  Clock::time_point t0 = Clock::now();
  // Other processes' CPU use in % of one core over the interval.
  double foreign_percent() const {
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const double jiffies = double((total_busy() - busy0) - (own_busy() - own0));
    return 100.0 * jiffies / double(sysconf(_SC_CLK_TCK)) / std::max(secs, 1e-9);
  }
};

// Median seconds per call of each runner. The runners are timed in turns
// (a, b, c, a, b, c, ...) after one warm-up each, so that load from other
// processes on a shared machine hits them alike; at least 3 turns, and more
// until min_time has passed (at most 50).
std::vector<double> time_alternating(const std::vector<std::function<void()>>& runners, double min_time) {
  for (const auto& r : runners) r();
  std::vector<std::vector<double>> t(runners.size());
  const auto start = Clock::now();
  for (int turn = 0; turn < 50; ++turn) {
    if (turn >= 3 && std::chrono::duration<double>(Clock::now() - start).count() >= min_time) break;
    for (size_t i = 0; i < runners.size(); ++i) {
      const auto t0 = Clock::now();
      runners[i]();
      t[i].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  std::vector<double> medians;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    medians.push_back(v[v.size() / 2]);
  }
  return medians;
}

struct Result {
  double seconds = 0;  // per node
  bool ran = false;
};

Ort::SessionOptions session_options(int threads) {
  Ort::SessionOptions o;
  o.SetIntraOpNumThreads(threads);
  o.SetInterOpNumThreads(1);
  o.SetExecutionMode(ExecutionMode::ORT_SEQUENTIAL);
  o.SetGraphOptimizationLevel(GraphOptimizationLevel::ORT_ENABLE_ALL);
  return o;
}

// One Run of a session (all R nodes) with preallocated, bound outputs.
class BoundSession {
 public:
  BoundSession(Ort::Session session, std::vector<float>& a, int64_t m, int64_t k, int64_t n,
               std::vector<std::vector<float>>& outputs)
      : session_(std::move(session)), binding_(session_) {
    const auto mem = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    const std::vector<int64_t> a_dims = {m, k}, y_dims = {m, n};
    values_.push_back(Ort::Value::CreateTensor<float>(mem, a.data(), a.size(), a_dims.data(), 2));
    binding_.BindInput("A", values_.back());
    for (size_t i = 0; i < outputs.size(); ++i) {
      values_.push_back(Ort::Value::CreateTensor<float>(mem, outputs[i].data(), outputs[i].size(), y_dims.data(), 2));
      binding_.BindOutput(("Y" + std::to_string(i)).c_str(), values_.back());
    }
  }
  void run() { session_.Run(run_options_, binding_); }

 private:
  Ort::Session session_;
  Ort::IoBinding binding_;
  Ort::RunOptions run_options_;
  std::vector<Ort::Value> values_;
};

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 1e-30;
  for (float x : b) scale = std::max(scale, double(std::fabs(x)));
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst / scale;
}

void run_row(const Options& opt, int64_t k, int64_t n, int64_t m, const fs::path& tmp) {
  const kernels::NBitsShape shape{n, k, 4, opt.block_size};
  const double file_bytes = double(shape.file_bytes(false));
  const int64_t copies = m == 1 ? std::clamp<int64_t>(int64_t(std::ceil(opt.stream_mb * 1e6 / file_bytes)), 1, 2048) : 1;
  std::vector<WeightSet> weights;
  std::vector<graph::MatMulNBitsNode> nodes;
  for (int64_t i = 0; i < copies; ++i) weights.push_back(random_weights(k, n, opt.block_size, uint64_t(i + 1)));
  for (const auto& w : weights) nodes.push_back({w.view()});
  const fs::path model_path = tmp / "bench.onnx";
  {
    std::ofstream out(model_path, std::ios::binary);
    graph::matmul_nbits_model(nodes, 4).SerializeToOstream(&out);
  }
  std::vector<float> a(size_t(m * k));
  XorShift rng{77};
  for (auto& x : a) x = float(int64_t(rng.next() % 2001) - 1000) / 1000.0f;

  auto has = [&](const char* impl) { return std::find(opt.impls.begin(), opt.impls.end(), impl) != opt.impls.end(); };
  for (int threads : opt.threads) {
    CpuMeter meter;
    Result ort, op, raw;
    std::vector<std::vector<float>> y_ort(size_t(copies), std::vector<float>(size_t(m * n)));
    std::vector<std::vector<float>> y_op = y_ort;
    std::vector<float> y_raw(size_t(m * n));
    std::unique_ptr<BoundSession> ort_session, op_session;
    std::vector<kernels::PackedWeights> packed;
    kernels::ThreadPool pool(threads);
    kernels::MatMulConfig config;
    if (!opt.max_level.empty()) config.level = std::min(config.level, kernels::parse_level(opt.max_level).value());
    if (opt.amx_min_rows > 0) config.amx_min_rows = opt.amx_min_rows;
    config.avx_vnni = opt.avx_vnni;
    std::vector<std::function<void()>> runners;
    std::vector<Result*> results;
    if (has("ort")) {
      ort_session = std::make_unique<BoundSession>(Ort::Session(ort_env(), model_path.c_str(), session_options(threads)),
                                                   a, m, k, n, y_ort);
      runners.push_back([&] { ort_session->run(); });
      results.push_back(&ort);
    }
    if (has("op")) {
      Ort::SessionOptions options = session_options(threads);
      if (!opt.max_level.empty()) options.AddConfigEntry(ortext::kConfigMaxLevel, opt.max_level.c_str());
      if (!opt.avx_vnni) options.AddConfigEntry(ortext::kConfigAvxVnni, "0");
      if (opt.amx_min_rows > 0)
        options.AddConfigEntry(ortext::kConfigAmxMinRows, std::to_string(opt.amx_min_rows).c_str());
      op_session = std::make_unique<BoundSession>(
          ortext::create_session_with_fast_kernels(ort_env(), model_path, options), a, m, k, n, y_op);
      runners.push_back([&] { op_session->run(); });
      results.push_back(&op);
    }
    if (has("kernel")) {
      for (const auto& w : weights) packed.push_back(kernels::pack_weights(w.view()));
      runners.push_back([&] {
        for (const auto& p : packed) kernels::matmul_nbits(p, a.data(), m, nullptr, y_raw.data(), pool, config);
      });
      results.push_back(&raw);
    }
    const std::vector<double> seconds = time_alternating(runners, opt.min_time * double(runners.size()));
    for (size_t i = 0; i < results.size(); ++i) *results[i] = {seconds[i] / double(copies), true};
    const double flops = 2.0 * double(m) * double(n) * double(k);
    auto cells = [&](const Result& r) {
      char buf[96];
      if (!r.ran) return std::string("| - | - | - ");
      std::snprintf(buf, sizeof buf, "| %.3f | %.1f | %.0f ", r.seconds * 1e3, file_bytes / r.seconds / 1e9,
                    flops / r.seconds / 1e9);
      return std::string(buf);
    };
    std::string check = "-";
    if (ort.ran && op.ran) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1e", max_rel_diff(y_op[0], y_ort[0]));
      check = buf;
    }
    const double best = op.ran ? op.seconds : raw.seconds;
    char speed[32] = "-";
    if (ort.ran && (op.ran || raw.ran)) std::snprintf(speed, sizeof speed, "%.2fx", ort.seconds / best);
    std::printf("| %lld | %lld | %lld | %d %s%s%s| %s | %s | %.0f |\n", (long long)k, (long long)n, (long long)m, threads,
                cells(ort).c_str(), cells(op).c_str(), cells(raw).c_str(), speed, check.c_str(),
                meter.foreign_percent());
    std::fflush(stdout);
  }
  fs::remove(model_path);
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const auto& f = kernels::cpu_features();
  std::printf("kernel level: %s (avx2 %d, avx512 %d, vnni %d, avx512_bf16 %d, amx_bf16 %d, amx permitted %d, avx_vnni %d%s)\n",
              kernels::level_name(kernels::default_level()), f.avx2, f.avx512, f.avx512_vnni, f.avx512_bf16, f.amx_bf16,
              f.amx_permitted, f.avx_vnni, opt.avx_vnni ? "" : " off");
  std::printf("block_size %d, symmetric, accuracy_level 4; M=1 streams >= %lld MB per pass\n\n", opt.block_size,
              (long long)opt.stream_mb);
  std::printf("| K | N | M | thr | ORT ms | ORT GB/s | ORT GFLOP/s | op ms | op GB/s | op GFLOP/s | kernel ms | kernel GB/s "
              "| kernel GFLOP/s | op vs ORT | max rel diff | busy%% |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  const fs::path tmp = fs::temp_directory_path() / ("deltagen-bench-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  for (int64_t m : opt.ms)
    for (auto [k, n] : opt.shapes) run_row(opt, k, n, m, tmp);
  fs::remove_all(tmp);
  return 0;
}
