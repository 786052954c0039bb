// What one request's sequence produces, handed from the scheduler's thread
// (producer: tokens as they are chosen, then the end) to the thread that
// answers the client (consumer: waits, writes, and cancels when the client
// has gone). The producer never blocks on the consumer.
#pragma once
#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "deltagen/options.h"
#include "runtime/logprobs.h"

namespace deltagen::serve {

struct TokenEvent {
  int64_t token = 0;
  std::string text;  // the text this token made final (stop strings held back until decided)
  std::optional<TokenLogprobs> logprobs;
};

struct SequenceEnd {
  StopReason stop_reason = StopReason::MaxNewTokens;
  std::string error;  // non-empty: the sequence failed (one line)
  std::vector<int64_t> generated_ids;
  std::string text;  // all of it, cut before a stop string
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;     // restored from the prefix cache instead of run
  int64_t prefilled_tokens = 0;  // run in the prefill (prompt_tokens - cached_tokens)
  double queue_seconds = 0, prefill_seconds = 0, decode_seconds = 0;
  // From the first token handed to the stream to the last: the decode steps
  // plus the scheduler's own work per token (sampling, detokenizing).
  double stream_seconds = 0;
};

class SequenceStream {
 public:
  // ---- consumer ----
  // Waits up to `timeout` for something new; moves the new tokens into
  // `tokens` (appending) and returns the end once the sequence has ended.
  std::optional<SequenceEnd> wait(std::vector<TokenEvent>& tokens, std::chrono::milliseconds timeout);
  // The client went away or asked to stop: the scheduler ends the sequence
  // at its next step (StopReason::Cancelled).
  void cancel() { cancelled_.store(true); }

  // ---- producer ----
  bool cancelled() const { return cancelled_.load(); }
  void push(TokenEvent event);
  void finish(SequenceEnd end);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<TokenEvent> pending_;
  std::optional<SequenceEnd> end_;
  bool end_taken_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace deltagen::serve
