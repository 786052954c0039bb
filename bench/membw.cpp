// membw: the machine's memory read bandwidth, measured the simple way --
// threads summing buffers far larger than every cache -- so that decode
// speeds can be stated as a fraction of what the memory delivers and compared
// across machines (docs/results.md).
//
//   membw [--threads N] [--buffers 3] [--mib 1024] [--passes 5] [--huge-pages] [--json]
//
// Each pass reads every buffer once: each thread sums its own contiguous
// slice of each buffer (the slices were first written by the same thread, so
// pages sit on its NUMA node). Bandwidth = bytes read / wall time of the pass,
// in GB/s (1e9 bytes). The best pass is the number to quote, the median shows
// how steady the machine was, and every pass records the interference meter
// that deltagen bench uses (CPU time of other processes, measure/meters.h).
// --huge-pages puts the buffers on transparent huge pages, as deltagen's
// packed weights are (kernels/stream_memory.h): on this VM that reads
// measurably faster than 4 KiB pages (docs/performance.md 1.14).
#include <sys/mman.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "measure/meters.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  int buffers = 3;
  int64_t mib = 1024;
  int passes = 5;
  bool json = false;
  bool huge_pages = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "error: membw: %s\nusage: membw [--threads N] [--buffers B] [--mib M] [--passes P] [--huge-pages] [--json]\n",
               msg.c_str());
  std::exit(2);
}

int64_t int_arg(int argc, char** argv, int& i) {
  if (i + 1 >= argc) usage_error(std::string(argv[i]) + " needs a value");
  char* end = nullptr;
  long long v = std::strtoll(argv[++i], &end, 10);
  if (*end || v < 1) usage_error(std::string(argv[i - 1]) + ": not a positive integer: " + argv[i]);
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads") o.threads = int(int_arg(argc, argv, i));
    else if (a == "--buffers") o.buffers = int(int_arg(argc, argv, i));
    else if (a == "--mib") o.mib = int_arg(argc, argv, i);
    else if (a == "--passes") o.passes = int(int_arg(argc, argv, i));
    else if (a == "--json") o.json = true;
    else if (a == "--huge-pages") o.huge_pages = true;
    else usage_error("unknown argument " + a);
  }
  return o;
}

// Sums n words with eight independent accumulators, so the loop is limited by
// loads, not by one add's latency (the compiler vectorizes it).
// Compiled for several instruction sets, picked at run time: a baseline x86-64
// build (SSE2 only) reads measurably slower than the memory can deliver.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += p[i + size_t(k)];
  for (; i < n; ++i) acc[0] += p[i];
  uint64_t s = 0;
  for (uint64_t a : acc) s += a;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const size_t words = size_t(o.mib) * (1u << 20) / sizeof(uint64_t);
  std::vector<uint64_t*> buffers;
  for (int b = 0; b < o.buffers; ++b) {
    const size_t align = o.huge_pages ? size_t(2) << 20 : 4096;
    auto* p = static_cast<uint64_t*>(std::aligned_alloc(align, words * sizeof(uint64_t)));
    if (!p) usage_error("cannot allocate " + std::to_string(o.mib) + " MiB");
    if (o.huge_pages) ::madvise(p, words * sizeof(uint64_t), MADV_HUGEPAGE);
    buffers.push_back(p);
  }
  // Thread t owns words [t * words / T, (t + 1) * words / T) of every buffer.
  auto slice = [&](int t) { return std::pair(words * size_t(t) / size_t(o.threads), words * size_t(t + 1) / size_t(o.threads)); };

  std::vector<uint64_t> sums(size_t(o.threads));
  std::vector<double> gbps, foreign;
  // Pass -1 writes the buffers (first touch); passes 0.. read them.
  for (int pass = -1; pass < o.passes; ++pass) {
    std::barrier start(o.threads + 1);
    std::vector<std::thread> threads;
    for (int t = 0; t < o.threads; ++t) {
      threads.emplace_back([&, t] {
        auto [begin, end] = slice(t);
        start.arrive_and_wait();
        uint64_t s = 0;
        for (uint64_t* buf : buffers) {
          if (pass < 0) {
            for (size_t i = begin; i < end; ++i) buf[i] = i ^ uint64_t(t);
          } else {
            s += sum_words(buf + begin, end - begin);
          }
        }
        sums[size_t(t)] += s;
      });
    }
    start.arrive_and_wait();  // all threads are started: the clock starts now
    const auto cpu0 = deltagen::measure::sample_cpu();
    const auto t0 = Clock::now();
    for (auto& th : threads) th.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto meter = deltagen::measure::interference_between(cpu0, deltagen::measure::sample_cpu());
    if (pass >= 0) {
      gbps.push_back(double(words * sizeof(uint64_t)) * double(o.buffers) / seconds / 1e9);
      foreign.push_back(meter.foreign_cpu_pct);
    }
  }
  uint64_t checksum = 0;
  for (uint64_t s : sums) checksum += s;  // printed, so the sums cannot be optimized away
  for (uint64_t* p : buffers) std::free(p);

  std::vector<double> sorted = gbps;
  std::sort(sorted.begin(), sorted.end());
  const double best = sorted.back(), median = sorted[sorted.size() / 2];
  const double max_foreign = *std::max_element(foreign.begin(), foreign.end());
  if (o.json) {
    std::printf("{\"threads\": %d, \"buffers\": %d, \"mib\": %lld, \"passes\": %d, \"huge_pages\": %s, \"best_gbps\": %.3f, "
                "\"median_gbps\": %.3f, \"max_foreign_cpu_pct\": %.1f, \"checksum\": %llu}\n",
                o.threads, o.buffers, (long long)o.mib, o.passes, o.huge_pages ? "true" : "false", best, median,
                max_foreign, (unsigned long long)checksum);
  } else {
    std::printf("membw: %d thread(s), %d x %lld MiB%s, %d passes: read bandwidth best %.2f GB/s, median %.2f GB/s,"
                " foreign CPU up to %.0f %% of a core (checksum %llu)\n",
                o.threads, o.buffers, (long long)o.mib, o.huge_pages ? " on huge pages" : "", o.passes, best, median,
                max_foreign, (unsigned long long)checksum);
  }
  return 0;
}
