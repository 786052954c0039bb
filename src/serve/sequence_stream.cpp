#include "serve/sequence_stream.h"

namespace deltagen::serve {

std::optional<SequenceEnd> SequenceStream::wait(std::vector<TokenEvent>& tokens, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [this] { return !pending_.empty() || (end_ && !end_taken_); });
  for (TokenEvent& e : pending_) tokens.push_back(std::move(e));
  pending_.clear();
  if (end_ && !end_taken_) {
    end_taken_ = true;
    return std::move(*end_);
  }
  return std::nullopt;
}

void SequenceStream::push(TokenEvent event) {
  {
    std::lock_guard lock(mutex_);
    pending_.push_back(std::move(event));
  }
  changed_.notify_all();
}

void SequenceStream::finish(SequenceEnd end) {
  {
    std::lock_guard lock(mutex_);
    end_ = std::move(end);
  }
  changed_.notify_all();
}

}  // namespace deltagen::serve
