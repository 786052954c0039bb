// Continuous batching over one model: up to `parallel` sequences decode
// together in one batched step, requests join and leave between steps, and
// a new request's prompt is prefilled in chunks interleaved with the decode
// steps of the running ones, so their streams keep flowing. Nothing here
// knows about HTTP: the server (serve/http_server.h) and the tests submit
// token ids and read SequenceStreams.
//
// Rows: the Generator holds `parallel` rows of hybrid state. The decoding
// sequences always sit in rows [0, n) so that a step runs a batch-n view of
// the state and nothing else (no dummy tokens for idle rows); when one ends,
// the last one moves into its row. One sequence at a time prefills, in the
// first free row, and joins the decoders when its prompt is done.
//
// Prompt cache (runtime/prefix_cache.h): a new sequence restores the deepest
// cached snapshot that is a prefix of its prompt and runs only the rest. The
// prefill stops at the positions the request names (message boundaries) and
// every `checkpoint_every` tokens to copy the state into the cache.
#pragma once
#include <chrono>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "deltagen/deltagen.h"
#include "runtime/json_grammar.h"
#include "runtime/prefix_cache.h"
#include "serve/histogram.h"
#include "serve/sequence_stream.h"

namespace deltagen {
struct RowImages;  // runtime/generator.h
}

namespace deltagen::serve {

// The most top_logprobs a request may ask for (OpenAI's limit).
inline constexpr int64_t kMaxTopLogprobs = 20;

struct SchedulerOptions {
  // Sequences that decode together; 0 = 4 on the CPU, 1 on a device
  // provider (whose state runs as one batch-1 twin: runtime/state.h).
  int64_t parallel = 0;
  int64_t max_length = 0;           // tokens per sequence (prompt + reply); 0 = the engine's
  int64_t prefill_chunk = 256;      // prompt tokens per run between two decode steps
  int64_t max_queue = 64;           // requests waiting for a row; more are refused (Busy)
  int64_t checkpoint_every = 2048;  // also cache a long prompt's state every this many tokens; 0 = off
  bool cache = true;                // false: no prompt cache at all
  PrefixCacheOptions cache_options;
  // Every sequence speculates on its own (serve --speculative, --draft-tokens):
  // a sequence with guesses checks them in a run of its own while the others
  // step together; the output is what it would be without.
  SpeculativeOptions speculative;
  // The unit a router counts the state memory and prefix matches in
  // (/metrics' vllm:cache_config_info, the KV events' blocks): tokens per block.
  int64_t block_size = 16;
};

struct SequenceRequest {
  std::vector<int64_t> prompt;
  // Prompt positions whose state is worth caching (e.g. the end of the last
  // user message: the next turn re-renders the history up to there).
  std::vector<int64_t> checkpoints;
  // max_new_tokens, sampling (with its seed), stop ids and strings; the
  // prefill chunk and collect_logits are the scheduler's business.
  GenerationOptions options;
  int64_t top_logprobs = -1;  // -1: no logprobs; else the chosen token's and this many alternatives'
  // response_format: the reply must be this JSON (runtime/json_grammar.h),
  // from the token after `grammar_after` (a reasoning model's </think>) or
  // from the start (-1). Each sequence works on its own copy.
  std::shared_ptr<const JsonGrammar> grammar;
  int64_t grammar_after = -1;
  // A --vision model's images (runtime/image_prompt.h, prepared by the
  // Service): the prompt holds each image's pads expanded; `images` has their
  // features and the 3-D positions of the whole prompt from position 0;
  // `image_keys` each image's pad run and pixel hash, which the prompt cache
  // keys on (a cached state is shared only up to the first other image).
  std::shared_ptr<const RowImages> images;
  std::vector<SnapshotImage> image_keys;
};

// The queue is full or the server is stopping: try again later (HTTP 503).
class Busy : public Error {
 public:
  using Error::Error;
};

struct SchedulerStats {
  int64_t requests = 0, finished = 0, failed = 0, cancelled = 0;
  int64_t running = 0, queued = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0, prefilled_tokens = 0, generated_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;  // wall time of the runs
  int64_t decode_steps = 0, decode_rows = 0;        // steps, and sequences summed over the steps
  // By the number of sequences a step ran ([n], n = 0..parallel): steps and their wall time.
  std::vector<int64_t> steps_by_rows;
  std::vector<double> seconds_by_rows;
  // Speculation: runs that checked guesses (with their wall time), the
  // guesses made and kept, and the runs that rolled a sequence back.
  int64_t verify_runs = 0, drafted_tokens = 0, accepted_tokens = 0, replay_runs = 0;
  double verify_seconds = 0;
  PrefixCacheStats cache;
  // For routers (vLLM's metric names, docs/scale-out.md): prompt tokens
  // looked up in the prompt cache and found there, counted when a request
  // is admitted; latencies per request (time to first token, queue time) and
  // per token (between two tokens of one sequence).
  int64_t prefix_query_tokens = 0, prefix_hit_tokens = 0;
  Histogram time_to_first_token{time_to_first_token_buckets()};
  Histogram inter_token{inter_token_buckets()};
  Histogram queue_time{queue_time_buckets()};
  // The share (0..1) of the state memory the running sequences occupy: the
  // rows' linear states plus their KV caches up to their lengths, over every
  // row's full capacity. The prompt cache is not counted (it can be evicted).
  double state_usage = 0;
};

class Scheduler {
 public:
  Scheduler(std::shared_ptr<Engine> engine, SchedulerOptions options);
  ~Scheduler();  // stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a sequence. Throws Error for a request that can never run (empty
  // prompt, unknown ids, longer than max_length, bad sampling settings) and
  // Busy when the queue is full or the scheduler is stopping.
  std::shared_ptr<SequenceStream> submit(SequenceRequest request);

  // Adds a saved state to the prompt cache (serve --load-state).
  void warm_cache(const Snapshot& snapshot);

  // Ends every sequence (running and queued: StopReason::Cancelled) and the
  // worker thread; later submits are Busy. Idempotent.
  void stop();

  SchedulerStats stats() const;
  // Drops every prompt cache entry (POST /reset_prefix_cache); false when the cache is off.
  bool reset_cache();
  // Throws what submit() would for this request, without queueing it (the
  // render endpoints: a request checked like a real one, not run).
  void check(const SequenceRequest& request) const;
  int64_t max_length() const;
  const SchedulerOptions& options() const { return options_; }
  Engine& engine() const { return *engine_; }

 private:
  struct Sequence;
  class Worker;

  void run();  // the worker thread
  void record_end(const SequenceEnd& end);
  void record_prefill(int64_t tokens, double seconds);
  void record_step(int64_t rows, double seconds);
  void record_verify(int64_t drafted, int64_t accepted, bool replayed, double seconds);
  void record_admit(double queue_seconds, int64_t looked_up, int64_t found);
  void record_token(double seconds, bool first);

  std::shared_ptr<Engine> engine_;
  SchedulerOptions options_;
  std::unique_ptr<PrefixCache> cache_;
  std::unique_ptr<Worker> worker_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> queue_;
  bool stopping_ = false;
  std::once_flag stopped_;
  SchedulerStats stats_;  // guarded by mutex_ (the cache's own are read at stats())
  std::atomic<double> state_usage_{0};  // written by the worker after each iteration
  std::thread thread_;
};

}  // namespace deltagen::serve
