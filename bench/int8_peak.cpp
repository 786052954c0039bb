// int8_peak: the host's int8 dot-product roof, per thread and for all
// threads, for each instruction form deltagen's int4 kernels are built on, so
// every kernel figure in docs/performance.md can be stated as a fraction of
// the roof of the machine it ran on (issue 28).
//
//   int8_peak [--threads N] [--seconds 0.5] [--json]
//
// Forms (each timed only where CPUID says the CPU has it):
//   avx512_vnni  VPDPBUSD zmm: 64 u8 x s8 products summed into 16 int32
//   avx_vnni     VPDPBUSD ymm (VEX): 32 products (the AVX2 tile with AVX-VNNI)
//   avx2         VPMADDUBSW + VPADDW ymm: 32 products into int16 pairs (the
//                AVX2 tile without VNNI)
// A product is a multiply-add: GOP/s counts it as 2 operations, as the
// kernels' GFLOP/s columns do. Each thread runs 12 independent accumulator
// chains (more than latency x throughput on current cores), so the loop is
// bound by the instruction's throughput, not its latency. Each figure is the
// best of three timings of >= --seconds. AMX is not measured
// (deltagen's AMX path is bf16 tiles; its roof is the AMX unit's).
#include <immintrin.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu_features.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kChains = 12;
constexpr int64_t kInnerIterations = 1 << 16;

// Each returns the products it computed; `sink` keeps the sums alive.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int64_t run_avx512_vnni(int64_t rounds, int32_t* sink) {
  __m512i acc[kChains];
  const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  for (int64_t it = 0; it < rounds * kInnerIterations; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], u, s);
  __m512i total = acc[0];
  for (int i = 1; i < kChains; ++i) total = _mm512_add_epi32(total, acc[i]);
  *sink = _mm512_reduce_add_epi32(total);
  return rounds * kInnerIterations * kChains * 64;
}

__attribute__((target("avx2,avxvnni"))) int64_t run_avx_vnni(int64_t rounds, int32_t* sink) {
  __m256i acc[kChains];
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi32(i);
  for (int64_t it = 0; it < rounds * kInnerIterations; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], u, s);
  __m256i total = acc[0];
  for (int i = 1; i < kChains; ++i) total = _mm256_add_epi32(total, acc[i]);
  *sink = _mm256_extract_epi32(total, 0);
  return rounds * kInnerIterations * kChains * 32;
}

__attribute__((target("avx2"))) int64_t run_avx2(int64_t rounds, int32_t* sink) {
  __m256i acc[kChains];
  const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi16(int16_t(i));
  for (int64_t it = 0; it < rounds * kInnerIterations; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_add_epi16(acc[i], _mm256_maddubs_epi16(u, s));
  __m256i total = acc[0];
  for (int i = 1; i < kChains; ++i) total = _mm256_add_epi16(total, acc[i]);
  *sink = _mm256_extract_epi16(total, 0);
  return rounds * kInnerIterations * kChains * 32;
}

struct Form {
  const char* name;
  bool available;
  int64_t (*run)(int64_t rounds, int32_t* sink);
};

// GOP/s of `form` on `threads` threads started together, over >= seconds.
double measure(const Form& form, int threads, double seconds) {
  // Calibrate the rounds on one thread, then time all threads together.
  int32_t sink = 0;
  int64_t rounds = 1;
  for (;;) {
    const auto t0 = Clock::now();
    form.run(rounds, &sink);
    if (std::chrono::duration<double>(Clock::now() - t0).count() >= seconds / 4) break;
    rounds *= 2;
  }
  rounds *= 4;
  std::vector<int64_t> products(static_cast<size_t>(threads));
  std::vector<int32_t> sinks(static_cast<size_t>(threads));
  std::barrier start(threads + 1);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      products[size_t(t)] = form.run(rounds, &sinks[size_t(t)]);
    });
  start.arrive_and_wait();
  const auto t0 = Clock::now();
  for (auto& t : pool) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  int64_t total = 0;
  for (int64_t p : products) total += p;
  return 2.0 * double(total) / elapsed / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  double seconds = 0.5;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--json") {
      json = true;
    } else if (i + 1 < argc && flag == "--threads") {
      threads = std::atoi(argv[++i]);
    } else if (i + 1 < argc && flag == "--seconds") {
      seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "int8_peak: unknown or incomplete flag '%s' (--threads N, --seconds S, --json)\n",
                   flag.c_str());
      return 2;
    }
  }
  if (threads < 1 || threads > 1024 || !(seconds > 0 && seconds <= 60)) {
    std::fprintf(stderr, "int8_peak: --threads must be 1-1024 and --seconds in (0, 60]\n");
    return 2;
  }
  const auto& f = deltagen::kernels::cpu_features();
  const Form forms[] = {{"avx512_vnni", f.avx512 && f.avx512_vnni, run_avx512_vnni},
                        {"avx_vnni", f.avx_vnni, run_avx_vnni},
                        {"avx2", f.avx2, run_avx2}};
  if (!json) {
    std::printf("int8 dot-product roof, GOP/s (a multiply-add = 2 operations), %d threads\n\n", threads);
    std::printf("| form | 1 thread | %d threads | scaling |\n|---|---:|---:|---:|\n", threads);
  }
  std::string out = "{\"threads\": " + std::to_string(threads) + ", \"forms\": {";
  bool first = true;
  for (const Form& form : forms) {
    if (!form.available) {
      if (!json) std::printf("| %s | not on this CPU | | |\n", form.name);
      continue;
    }
    // Best of three: the first pass on an idle core often runs before its clock has risen.
    double one = 0, all = 0;
    for (int pass = 0; pass < 3; ++pass) {
      one = std::max(one, measure(form, 1, seconds));
      all = std::max(all, threads > 1 ? measure(form, threads, seconds) : one);
    }
    if (!json) std::printf("| %s | %.0f | %.0f | %.2fx |\n", form.name, one, all, all / one);
    char entry[160];
    std::snprintf(entry, sizeof entry, "%s\"%s\": {\"gops_1_thread\": %.1f, \"gops_all_threads\": %.1f}",
                  first ? "" : ", ", form.name, one, all);
    out += entry;
    first = false;
  }
  out += "}}";
  if (json) std::printf("%s\n", out.c_str());
  return 0;
}
