// The work one render may do (Limits::max_loop_iterations): loop iterations,
// macro calls, items a filter walks, and bytes scanned by operations whose cost
// grows with a string's length (comparing, searching, measuring, indexing,
// hashing a dict key). Without the last, a loop could compare an 8 MB string a
// million times. The budget of the render running on this thread is reached
// through a thread-local pointer, so value and string helpers can charge it
// without being handed the interpreter.
#pragma once
#include <cstddef>
#include <cstdint>

namespace deltagen::jinja {

class WorkBudget {
 public:
  // Becomes this thread's budget until destroyed.
  explicit WorkBudget(int64_t steps);
  ~WorkBudget();
  WorkBudget(const WorkBudget&) = delete;
  WorkBudget& operator=(const WorkBudget&) = delete;

 private:
  friend void charge_steps(int64_t n);
  int64_t limit_, left_;
  WorkBudget* outer_;
};

// Throws Problem "too many loop iterations" past the budget; outside a render
// (no budget on this thread) it does nothing.
void charge_steps(int64_t n);

// Scanning `bytes` of text: one step per 256 bytes, so short strings cost
// nothing and a render scans at most 256 MB at the default budget.
inline void charge_scan(size_t bytes) {
  if (bytes >= 256) charge_steps(int64_t(bytes >> 8));
}

}  // namespace deltagen::jinja
