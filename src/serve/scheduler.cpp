#include "serve/scheduler.h"

#include <algorithm>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <map>
#include <optional>
#include <string>

#include "runtime/engine_impl.h"
#include "runtime/generation.h"
#include "runtime/generator.h"
#include "runtime/logprobs.h"
#include "runtime/sampling.h"
#include "runtime/snapshot.h"
#include "runtime/text_stream.h"
#include "runtime/token_table.h"
#include "speculative/row_speculator.h"

namespace deltagen::serve {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}


// The part of a whole prompt's images that runs after its first `from`
// tokens, restored from the cache with rope delta `delta_before`: the feature
// rows of the pads past `from`, the positions from `from` on, and the delta
// that, added to delta_before, gives the whole prompt's.
RowImages images_after(const RowImages& all, std::span<const int64_t> prompt, size_t from, int64_t delta_before,
                       int64_t image_token_id, int64_t hidden) {
  const int64_t pads_before = std::count(prompt.begin(), prompt.begin() + ptrdiff_t(from), image_token_id);
  RowImages out;
  out.rows = all.rows - pads_before;
  out.features.assign(all.features.begin() + ptrdiff_t(pads_before * hidden), all.features.end());
  const auto tail = [&](const std::vector<int64_t>& v) { return std::vector<int64_t>(v.begin() + ptrdiff_t(from), v.end()); };
  out.positions.t = tail(all.positions.t);
  out.positions.h = tail(all.positions.h);
  out.positions.w = tail(all.positions.w);
  out.positions.rope_delta = all.positions.rope_delta - delta_before;
  out.positions.next = all.positions.next;
  return out;
}

// The images that begin inside the first `length` tokens.
std::vector<SnapshotImage> images_before(const std::vector<SnapshotImage>& keys, size_t length) {
  std::vector<SnapshotImage> out;
  for (const SnapshotImage& k : keys)
    if (k.start < int64_t(length)) out.push_back(k);
  return out;
}

}  // namespace

struct Scheduler::Sequence {
  std::shared_ptr<SequenceStream> stream = std::make_shared<SequenceStream>();
  SequenceRequest request;
  std::vector<int64_t> stop_ids;
  Clock::time_point submitted = Clock::now();
  int64_t row = -1;
  size_t fed = 0;  // prompt tokens in the row's state (restored or run)
  std::optional<Sampler> sampler;
  std::optional<TextStream> text;
  std::vector<int64_t> generated;
  int64_t next_token = -1;  // chosen, not yet run
  std::optional<StopReason> stop;
  SequenceEnd end;
  std::optional<JsonGrammar> grammar;  // the reply's constraint, once active
  Clock::time_point first_push;
  Clock::time_point last_push;  // when the latest token was handed over (inter-token latency)
  const TokenTable* tokens = nullptr;  // with a grammar: the ids it may take
};

// Everything the worker thread owns: the state rows and the sequences in them.
class Scheduler::Worker {
 public:
  Worker(Scheduler& owner, Model& model, int64_t parallel, int64_t max_length, const Tokenizer* tokenizer)
      : owner_(owner),
        generator_(model, parallel, max_length),
        tokenizer_(tokenizer),
        spec_(generator_, owner.options_.speculative) {
    // A row's share of the state memory: its linear states whatever its
    // length, plus its KV cache per token run.
    const HybridState& state = generator_.state();
    for (size_t c = 0; c < state.io().caches.size(); ++c) {
      const double bytes = double(state.row_bytes(c, 0).size());
      if (is_kv(state.io().caches[c].kind)) kv_bytes_per_token_ += bytes / double(state.kv_capacity());
      else fixed_row_bytes_ += bytes;
    }
  }

  // The share of all rows' full capacity the running sequences occupy (0..1).
  double state_usage() const {
    const HybridState& state = generator_.state();
    const double row_capacity = fixed_row_bytes_ + kv_bytes_per_token_ * double(state.max_length());
    if (row_capacity <= 0) return 0;
    double used = 0;
    auto add = [&](int64_t row) { used += fixed_row_bytes_ + kv_bytes_per_token_ * double(state.length(row)); };
    for (const auto& s : decoding_) add(s->row);
    if (prefilling_) add(prefilling_->row);
    return std::min(1.0, used / (row_capacity * double(generator_.batch())));
  }

  bool busy() const { return prefilling_ || !decoding_.empty(); }
  bool can_admit() const { return !prefilling_ && int64_t(decoding_.size()) < generator_.batch(); }
  int64_t running() const { return int64_t(decoding_.size()) + (prefilling_ ? 1 : 0); }

  void admit(std::unique_ptr<Sequence> s) {
    s->end.queue_seconds = seconds_since(s->submitted);
    s->row = int64_t(decoding_.size());  // rows past the decoders are free
    if (s->stream->cancelled()) return finish(*s, StopReason::Cancelled);
    const std::span<const int64_t> prompt = s->request.prompt;
    HybridState& state = generator_.state();
    std::shared_ptr<const StateSnapshot> cached;
    // At least the last prompt token must run: its logits choose the first reply token.
    if (owner_.cache_) {
      const std::vector<int64_t> key = prefix_key(prompt, s->request.image_keys);
      cached = owner_.cache_->find(std::span(key).first(key.size() - 1));
    }
    generator_.reset_row(s->row);
    spec_.reset_row(s->row);
    if (cached) {
      try {
        restore_row(state, s->row, generator_.vocab(), *cached, "prompt cache");
        generator_.set_rope_delta(s->row, cached->rope_delta);
        s->fed = size_t(cached->length);
      } catch (const Error&) {
        generator_.reset_row(s->row);  // a snapshot of another shape: run the whole prompt
      }
    }
    if (s->request.images) {
      try {
        const Model& model = generator_.model();
        generator_.attach_images(s->row, images_after(*s->request.images, prompt, s->fed, generator_.rope_delta(s->row),
                                                      model.config().image_token_id, model.hidden_size()));
      } catch (const Error& e) {
        generator_.reset_row(s->row);
        return finish(*s, StopReason::Cancelled, e.what());
      }
    }
    s->end.cached_tokens = int64_t(s->fed);
    owner_.record_admit(s->end.queue_seconds, owner_.cache_ ? int64_t(prompt.size()) : 0, int64_t(s->fed));
    const SamplingOptions& sampling = s->request.options.sampling;
    s->sampler.emplace(sampling, generator_.vocab(), sampling.seed);
    s->sampler->begin(prompt);
    if (tokenizer_) s->text.emplace(*tokenizer_, s->request.options.stop_strings);
    if (s->request.grammar) {
      s->tokens = &token_table(s->stop_ids);
      if (s->request.grammar_after < 0) s->grammar.emplace(*s->request.grammar);
    }
    prefilling_ = std::move(s);
  }

  // One prefill run of the prefilling sequence, then one decode step of the others.
  void iterate() {
    if (prefilling_) prefill_chunk();
    if (!decoding_.empty()) decode_step();
  }

  void cancel_all() {
    if (prefilling_) finish(*prefilling_, StopReason::Cancelled);
    prefilling_.reset();
    for (auto& s : decoding_) finish(*s, StopReason::Cancelled);
    decoding_.clear();
  }

  void finish(Sequence& s, StopReason reason, const std::string& error = {}) {
    SequenceEnd& end = s.end;
    end.stop_reason = reason;
    end.error = error;
    end.generated_ids = s.generated;
    if (s.text) end.text = s.text->text();
    end.prompt_tokens = int64_t(s.request.prompt.size());
    end.prefilled_tokens = end.prompt_tokens - end.cached_tokens;
    owner_.record_end(end);
    s.stream->finish(std::move(end));
  }

 private:
  // The next position the prefill must stop at: the prompt's end, a
  // checkpoint, or the end of this chunk.
  size_t chunk_end(const Sequence& s) const {
    const size_t size = s.request.prompt.size();
    size_t end = std::min(size, s.fed + size_t(std::max<int64_t>(1, owner_.options_.prefill_chunk)));
    for (int64_t c : s.request.checkpoints)
      if (size_t(c) > s.fed && size_t(c) < end) end = size_t(c);
    const int64_t every = owner_.options_.checkpoint_every;
    if (every > 0) end = std::min(end, (s.fed / size_t(every) + 1) * size_t(every));
    return end;
  }

  bool is_checkpoint(const Sequence& s, size_t position) const {
    const auto& c = s.request.checkpoints;
    const int64_t every = owner_.options_.checkpoint_every;
    return std::find(c.begin(), c.end(), int64_t(position)) != c.end() || (every > 0 && position % size_t(every) == 0);
  }

  void prefill_chunk() {
    Sequence& s = *prefilling_;
    if (s.stream->cancelled()) {
      finish(s, StopReason::Cancelled);
      prefilling_.reset();
      return;
    }
    const std::span<const int64_t> prompt = s.request.prompt;
    const size_t end = chunk_end(s);
    const auto start = Clock::now();
    LogitsView logits;
    try {
      logits = generator_.run_row(s.row, prompt.subspan(s.fed, end - s.fed), false);
      spec_.observe(s.row, int64_t(s.fed), 0, int64_t(end - s.fed));
    } catch (const Error& e) {
      finish(s, StopReason::Cancelled, e.what());
      prefilling_.reset();
      return;
    }
    const double seconds = seconds_since(start);
    s.end.prefill_seconds += seconds;
    owner_.record_prefill(int64_t(end - s.fed), seconds);
    s.fed = end;
    if (owner_.cache_ && is_checkpoint(s, end)) {
      std::vector<SnapshotImage> images = images_before(s.request.image_keys, end);
      if (!owner_.cache_->contains(prefix_key(prompt.first(end), images))) {
        auto snapshot = std::make_shared<StateSnapshot>(capture_row(generator_.state(), s.row, generator_.vocab(), {}));
        snapshot->rope_delta = generator_.rope_delta(s.row);
        snapshot->images = std::move(images);
        owner_.cache_->insert(std::move(snapshot));
      }
    }
    if (end < prompt.size()) return;

    // The prompt is in: the sequence joins the decoders, in the row after theirs.
    std::unique_ptr<Sequence> joined = std::move(prefilling_);
    accept(*joined, choose(*joined, logits.row(0, logits.rows - 1)), logits.row(0, logits.rows - 1));
    if (joined->stop) return finish(*joined, *joined->stop);
    const int64_t row = int64_t(decoding_.size());
    if (joined->row != row) {
      generator_.copy_row(joined->row, row);
      spec_.move_row(joined->row, row);
    }
    joined->row = row;
    decoding_.push_back(std::move(joined));
  }

  // One token or more for every decoding sequence: those with guesses check
  // them in a run each (verify), the others take one step together, while
  // the ones with guesses sit it out parked.
  void decode_step() {
    const size_t n = decoding_.size();
    drafts_.resize(n);
    bool any_plain = false;
    for (size_t i = 0; i < n; ++i) {
      drafts_[i] = draft_for(*decoding_[i]);
      any_plain |= drafts_[i].empty();
    }
    if (any_plain) batched_step();
    for (size_t i = 0; i < n; ++i) {
      if (drafts_[i].empty()) continue;
      generator_.state().unpark(int64_t(i));
      if (!decoding_[i]->stop) verify(*decoding_[i], drafts_[i]);
    }
    // Ended sequences leave; the last decoder moves into each freed row so
    // that the decoders stay in rows [0, n). Walking down, every row above i
    // is already settled.
    for (size_t i = decoding_.size(); i-- > 0;) {
      if (!decoding_[i]->stop) continue;
      finish(*decoding_[i], *decoding_[i]->stop, decoding_[i]->end.error);  // error: a failed run's
      const size_t last = decoding_.size() - 1;
      if (i != last) {
        generator_.copy_row(int64_t(last), int64_t(i));
        spec_.move_row(int64_t(last), int64_t(i));
        decoding_[i] = std::move(decoding_[last]);
        decoding_[i]->row = int64_t(i);
      }
      decoding_.pop_back();
    }
  }

  void batched_step() {
    const size_t n = decoding_.size();
    tokens_.resize(n);
    int64_t rows = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool sits_out = !drafts_[i].empty();
      if (sits_out) generator_.state().park(int64_t(i));
      tokens_[i] = sits_out ? 0 : decoding_[i]->next_token;
      rows += sits_out ? 0 : 1;
    }
    const auto start = Clock::now();
    LogitsView logits;
    try {
      logits = generator_.step(tokens_);
    } catch (const Error& e) {  // every sequence of the step ends with the error
      for (size_t i = 0; i < n; ++i) {
        if (!drafts_[i].empty()) continue;
        decoding_[i]->stop = StopReason::Cancelled;
        decoding_[i]->end.error = e.what();
      }
      return;
    }
    const double seconds = seconds_since(start);
    owner_.record_step(rows, seconds);
    for (size_t i = 0; i < n; ++i) {
      if (!drafts_[i].empty()) continue;
      Sequence& s = *decoding_[i];
      spec_.observe(s.row, generator_.state().length(s.row) - 1, int64_t(i), 1);
      s.end.decode_seconds += seconds;
      accept(s, choose(s, logits.row(int64_t(i), 0)), logits.row(int64_t(i), 0));
    }
  }

  // A sequence's guesses (none without speculation).
  std::vector<int64_t> draft_for(const Sequence& s) {
    if (!spec_.active()) return {};
    try {
      return spec_.draft(s.row, s.next_token, s.request.options.max_new_tokens - int64_t(s.generated.size()));
    } catch (const Error&) {
      return {};  // a drafter that fails costs the guesses, not the request
    }
  }

  // The sequence's chosen token and its guesses in one run; each guess
  // stands only where the sequence's own sampler (and grammar) chooses it.
  void verify(Sequence& s, std::span<const int64_t> draft) {
    const int64_t k = int64_t(draft.size()), before = generator_.state().length(s.row);
    int64_t kept = 0;
    const auto start = Clock::now();
    RowSpeculator::Round round;
    try {
      round = spec_.verify(s.row, s.next_token, draft, [&](int64_t i, const float* logits) {
        const int64_t token = choose(s, logits);
        accept(s, token, logits, before + 1 + i);
        const bool same = i < k && token == draft[size_t(i)];
        kept += same ? 1 : 0;
        return same && !s.stop;
      });
    } catch (const Error& e) {
      s.stop = StopReason::Cancelled;
      s.end.error = e.what();
      return;
    }
    const double seconds = seconds_since(start);
    s.end.decode_seconds += seconds;
    owner_.record_verify(k, kept, round.replayed > 0, seconds);
  }

  // The next token: among those the reply's grammar allows, when it has one.
  int64_t choose(Sequence& s, const float* logits) {
    if (!s.grammar) return s.sampler->next(logits);
    const TokenTable& table = *s.tokens;
    const JsonGrammar& grammar = *s.grammar;
    return s.sampler->next(
        logits, [&](int64_t id) { return table.allowed(grammar, id); },
        [&](std::span<uint8_t> mask) { table.fill_allowed(grammar, mask); });
  }

  // The token bytes a grammar checks, made once per set of end ids (about 0.1 s for 151k ids).
  const TokenTable& token_table(std::vector<int64_t> end_ids) {
    std::sort(end_ids.begin(), end_ids.end());
    auto it = token_tables_.find(end_ids);
    if (it == token_tables_.end())
      it = token_tables_.emplace(end_ids, TokenTable::from_tokenizer(*tokenizer_, generator_.vocab(), end_ids)).first;
    return it->second;
  }

  // Records the chosen token, streams it, and decides whether the sequence
  // ends. `ran`: the tokens the row had run when it was chosen (its state's
  // length, except inside a verify run).
  void accept(Sequence& s, int64_t token, const float* logits, std::optional<int64_t> ran = std::nullopt) {
    s.generated.push_back(token);
    s.next_token = token;
    if (s.grammar) s.tokens->advance(*s.grammar, token);
    else if (s.request.grammar && token == s.request.grammar_after) s.grammar.emplace(*s.request.grammar);
    TokenEvent event{token, s.text ? s.text->push(token) : std::string(), std::nullopt};
    if (s.request.top_logprobs >= 0)
      event.logprobs = token_logprobs(logits, generator_.vocab(), token, s.request.top_logprobs);
    const GenerationOptions& o = s.request.options;
    if (std::find(s.stop_ids.begin(), s.stop_ids.end(), token) != s.stop_ids.end()) s.stop = StopReason::Eos;
    else if (s.text && s.text->stopped()) s.stop = StopReason::StopString;
    else if (int64_t(s.generated.size()) >= o.max_new_tokens) s.stop = StopReason::MaxNewTokens;
    else if (ran.value_or(generator_.state().length(s.row)) >= generator_.max_length()) s.stop = StopReason::Length;
    else if (s.stream->cancelled()) s.stop = StopReason::Cancelled;
    if (s.stop && s.text) event.text += s.text->finish();
    const auto now = Clock::now();
    const bool first = s.generated.size() == 1;
    owner_.record_token(std::chrono::duration<double>(now - (first ? s.submitted : s.last_push)).count(), first);
    if (first) s.first_push = now;
    s.last_push = now;
    s.end.stream_seconds = std::chrono::duration<double>(now - s.first_push).count();
    s.stream->push(std::move(event));
  }

  Scheduler& owner_;
  Generator generator_;
  const Tokenizer* tokenizer_;
  std::vector<std::unique_ptr<Sequence>> decoding_;  // decoding_[i]->row == i
  std::unique_ptr<Sequence> prefilling_;
  std::vector<int64_t> tokens_;
  std::vector<std::vector<int64_t>> drafts_;  // per decoding row, this step's guesses
  std::map<std::vector<int64_t>, TokenTable> token_tables_;  // by sorted end ids
  RowSpeculator spec_;
  double fixed_row_bytes_ = 0, kv_bytes_per_token_ = 0;
};

Scheduler::Scheduler(std::shared_ptr<Engine> engine, SchedulerOptions options)
    : engine_(std::move(engine)), options_(std::move(options)) {
  if (!engine_) fail("serve", "no engine");
  const auto& impl = detail::Access::engine(*engine_);
  const ExecutionProvider ep = impl.model->ep();
  if (options_.parallel == 0) options_.parallel = ep == ExecutionProvider::Cpu ? 4 : 1;
  if (ep != ExecutionProvider::Cpu && options_.parallel != 1)
    fail("--parallel", std::string("execution provider ") + execution_provider_name(ep) +
                           " runs one sequence at a time: use --parallel 1 (or leave it out)");
  if (options_.parallel < 1 || options_.parallel > HybridState::kMaxBatch)
    fail("serve", "--parallel must be between 1 and " + std::to_string(HybridState::kMaxBatch));
  if (options_.prefill_chunk < 1) fail("serve", "the prefill chunk must be at least 1 token");
  if (options_.max_queue < 0) fail("serve", "the queue length must not be negative");
  if (options_.checkpoint_every < 0) fail("serve", "the checkpoint interval must not be negative");
  if (options_.cache) cache_ = std::make_unique<PrefixCache>(options_.cache_options);
  stats_.steps_by_rows.assign(size_t(options_.parallel + 1), 0);
  stats_.seconds_by_rows.assign(size_t(options_.parallel + 1), 0.0);
  worker_ = std::make_unique<Worker>(*this, *impl.model, options_.parallel,
                                     resolve_max_length(*engine_, options_.max_length), impl.tokenizer_or_null());
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { stop(); }

int64_t Scheduler::max_length() const { return resolve_max_length(*engine_, options_.max_length); }

void Scheduler::check(const SequenceRequest& request) const {
  const Model& model = *detail::Access::engine(*engine_).model;
  if (request.prompt.empty()) fail("prompt", "is empty");
  check_token_ids(model, request.prompt);
  const int64_t limit = max_length();
  if (int64_t(request.prompt.size()) > limit)
    fail("prompt", std::to_string(request.prompt.size()) + " tokens do not fit the context of " +
                       std::to_string(limit) + " tokens");
  const GenerationOptions& o = request.options;
  if (o.max_new_tokens < 1) fail("max_tokens", "must be at least 1");
  validate_sampling(o.sampling);
  if (request.top_logprobs > kMaxTopLogprobs)
    fail("top_logprobs", "must be at most " + std::to_string(kMaxTopLogprobs));
  if (!o.stop_strings.empty() && !engine_->has_tokenizer()) fail("stop", "stop strings need a tokenizer");
  if (request.grammar && !engine_->has_tokenizer()) fail("response_format", "JSON output needs a tokenizer");
  for (int64_t c : request.checkpoints)
    if (c < 1 || c > int64_t(request.prompt.size())) fail("serve", "a checkpoint lies outside the prompt");
  if (request.images) {
    if (!model.has_vision()) fail("images", "this model takes no images: build it with --vision");
    if (request.images->positions.size() != int64_t(request.prompt.size()))
      fail("serve", "the images' positions do not cover the prompt");
  }
}

std::shared_ptr<SequenceStream> Scheduler::submit(SequenceRequest request) {
  check(request);
  const Model& model = *detail::Access::engine(*engine_).model;
  const GenerationOptions& o = request.options;
  auto s = std::make_unique<Sequence>();
  if (o.stop_at_eos) s->stop_ids = model.config().eos_token_ids;
  s->stop_ids.insert(s->stop_ids.end(), o.extra_stop_ids.begin(), o.extra_stop_ids.end());
  s->request = std::move(request);
  std::shared_ptr<SequenceStream> stream = s->stream;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw Busy("serve: the server is shutting down");
    // Room for `parallel` running (admitted: stats_.running) and `max_queue` waiting.
    if (int64_t(queue_.size()) + stats_.running >= options_.max_queue + options_.parallel)
      throw Busy("serve: " + std::to_string(stats_.running) + " requests are running and " +
                 std::to_string(queue_.size()) + " waiting already");
    queue_.push_back(std::move(s));
    ++stats_.requests;
    ++stats_.queued;
  }
  wake_.notify_all();
  return stream;
}

void Scheduler::warm_cache(const Snapshot& snapshot) {
  if (!cache_) fail("--load-state", "the prompt cache is off");
  const StateSnapshot& state = detail::Access::state(snapshot);
  // Cached states hold no pending token: drop it (it will be fed again with the prompt).
  auto copy = std::make_shared<StateSnapshot>(state);
  copy->tokens.resize(size_t(copy->length));
  cache_->insert(std::move(copy));
}

// After a burst the heap holds freed pages spread over malloc's per-thread
// arenas (HTTP threads, ORT's pool); without this a server's resident size
// only ever ratchets up to its worst burst. Once per transition to idle, so
// it never runs between decode steps.
static void release_free_heap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void Scheduler::run() {
  for (;;) {
    std::unique_ptr<Sequence> admitted;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty() || worker_->busy(); });
      if (stopping_) break;
      if (worker_->can_admit() && !queue_.empty()) {
        admitted = std::move(queue_.front());
        queue_.pop_front();
        --stats_.queued;
        ++stats_.running;
      }
    }
    if (admitted) worker_->admit(std::move(admitted));
    const bool was_busy = worker_->busy();
    worker_->iterate();
    state_usage_.store(worker_->state_usage(), std::memory_order_relaxed);
    if (was_busy && !worker_->busy()) {
      bool idle;
      {
        std::lock_guard lock(mutex_);
        idle = queue_.empty();
      }
      if (idle) release_free_heap();
    }
  }
  worker_->cancel_all();
  std::deque<std::unique_ptr<Sequence>> left;
  {
    std::lock_guard lock(mutex_);
    left.swap(queue_);
    stats_.queued = 0;
    stats_.running += int64_t(left.size());  // record_end counts each one down
  }
  for (auto& s : left) worker_->finish(*s, StopReason::Cancelled);
}

void Scheduler::stop() {
  std::call_once(stopped_, [this] {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  });
}

void Scheduler::record_end(const SequenceEnd& end) {
  std::lock_guard lock(mutex_);
  --stats_.running;
  if (!end.error.empty()) ++stats_.failed;
  else if (end.stop_reason == StopReason::Cancelled) ++stats_.cancelled;
  else ++stats_.finished;
  stats_.prompt_tokens += end.prompt_tokens;
  stats_.cached_tokens += end.cached_tokens;
  stats_.generated_tokens += int64_t(end.generated_ids.size());
}

void Scheduler::record_prefill(int64_t tokens, double seconds) {
  std::lock_guard lock(mutex_);
  stats_.prefilled_tokens += tokens;
  stats_.prefill_seconds += seconds;
}

void Scheduler::record_step(int64_t rows, double seconds) {
  std::lock_guard lock(mutex_);
  ++stats_.decode_steps;
  stats_.decode_rows += rows;
  stats_.decode_seconds += seconds;
  ++stats_.steps_by_rows[size_t(rows)];
  stats_.seconds_by_rows[size_t(rows)] += seconds;
}

void Scheduler::record_verify(int64_t drafted, int64_t accepted, bool replayed, double seconds) {
  std::lock_guard lock(mutex_);
  ++stats_.verify_runs;
  stats_.drafted_tokens += drafted;
  stats_.accepted_tokens += accepted;
  stats_.replay_runs += replayed ? 1 : 0;
  stats_.verify_seconds += seconds;
}

void Scheduler::record_admit(double queue_seconds, int64_t looked_up, int64_t found) {
  std::lock_guard lock(mutex_);
  stats_.queue_time.observe(queue_seconds);
  stats_.prefix_query_tokens += looked_up;
  stats_.prefix_hit_tokens += found;
}

void Scheduler::record_token(double seconds, bool first) {
  std::lock_guard lock(mutex_);
  (first ? stats_.time_to_first_token : stats_.inter_token).observe(seconds);
}

bool Scheduler::reset_cache() {
  if (!cache_) return false;
  cache_->clear();
  return true;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  {
    std::lock_guard lock(mutex_);
    s = stats_;
  }
  if (cache_) s.cache = cache_->stats();
  s.state_usage = state_usage_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace deltagen::serve
