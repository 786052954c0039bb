#include "chat/jinja/work.h"

#include <string>

#include "chat/jinja/problem.h"

namespace deltagen::jinja {
namespace {

thread_local WorkBudget* current = nullptr;

}  // namespace

WorkBudget::WorkBudget(int64_t steps) : limit_(steps), left_(steps), outer_(current) { current = this; }

WorkBudget::~WorkBudget() { current = outer_; }

void charge_steps(int64_t n) {
  WorkBudget* b = current;
  if (!b) return;
  b->left_ -= n;
  if (b->left_ < 0)
    problem("too many loop iterations: more than " + std::to_string(b->limit_) +
            " (loop iterations, macro calls, filter items and KiB of text scanned, together)");
}

}  // namespace deltagen::jinja
