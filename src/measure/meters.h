// What the machine did while we measured: CPU time of other processes
// (the interference meter), hypervisor steal, and this process's memory.
//
// The interference meter is the one the speed anchors were measured with: the machine is a
// small shared VM, and a build running next to a benchmark slows ONNX Runtime
// 1.5-3.5x. Each measured run therefore records how much CPU other processes
// used during it -- busy time of all CPUs from /proc/stat minus this
// process's own CPU time from /proc/self/stat -- so noisy runs can be spotted
// and excluded instead of silently averaged in.
#pragma once
#include <chrono>
#include <cstdint>

namespace deltagen::measure {

// Seconds on a monotonic clock.
inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct CpuSample {
  double wall = 0;       // now_seconds()
  double busy_all = 0;   // seconds of non-idle time of every CPU (user+nice+system+irq+softirq)
  double steal_all = 0;  // seconds stolen by the hypervisor, every CPU
  double self = 0;       // this process's user+system seconds, all threads
};

// Reads /proc/stat and /proc/self/stat; zeros where they are unavailable.
CpuSample sample_cpu();

struct Interference {
  double wall_seconds = 0;
  double foreign_cpu_seconds = 0;  // CPU time other processes used during the interval
  double foreign_cpu_pct = 0;      // ... as % of one core over the interval (100 = one busy core)
  double steal_pct = 0;            // hypervisor steal, % of one core
  double self_cpu_pct = 0;         // this process, % of one core (2 threads busy = 200)
};

// The kernel counts CPU time in ticks (usually 10 ms), so intervals of a few
// ticks read coarse: a 20 ms run with one foreign tick shows 50 %.
Interference interference_between(const CpuSample& begin, const CpuSample& end);

// Whether an interval was disturbed: more than `max_foreign_pct` of a core
// used by other processes, ignoring intervals where that is at most two
// clock ticks (pure tick quantization).
bool is_noisy(const Interference& m, double max_foreign_pct);

double clock_tick_seconds();

// From /proc/self/status, in bytes; 0 where unavailable.
int64_t peak_rss_bytes();     // VmHWM: the high-water mark of resident memory
int64_t current_rss_bytes();  // VmRSS

}  // namespace deltagen::measure
