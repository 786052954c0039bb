#include "runtime/generation.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "runtime/sampling.h"
#include "speculative/row_speculator.h"
#include "runtime/text_stream.h"
#include "tokenizer/tokenizer.h"
#include "deltagen/error.h"

namespace deltagen {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::MaxNewTokens: return "max_new_tokens";
    case StopReason::Eos: return "eos";
    case StopReason::StopString: return "stop_string";
    case StopReason::Length: return "length";
    case StopReason::Cancelled: return "cancelled";
  }
  return "?";
}

const char* speculative_method_name(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::None: return "none";
    case SpeculativeMethod::Ngram: return "ngram";
    case SpeculativeMethod::Mtp: return "mtp";
  }
  return "?";
}

SpeculativeMethod parse_speculative_method(const std::string& name) {
  for (SpeculativeMethod m : {SpeculativeMethod::None, SpeculativeMethod::Ngram, SpeculativeMethod::Mtp})
    if (name == speculative_method_name(m)) return m;
  fail("--speculative", "expected none, ngram or mtp, not '" + name + "'");
}

void check_draft_tokens(const std::string& flag, int64_t draft_tokens) {
  if (draft_tokens < 1 || draft_tokens > SpeculativeOptions::kMaxDraftTokens)
    fail(flag, "must be between 1 and " + std::to_string(SpeculativeOptions::kMaxDraftTokens) + ", not " +
                   std::to_string(draft_tokens));
}

void validate_speculative(const SpeculativeOptions& options) {
  check_draft_tokens("--draft-tokens", options.draft_tokens);
  if (options.ngram_min < 1 || options.ngram_max < options.ngram_min)
    fail("--ngram", "the suffix lengths must satisfy 1 <= min <= max, not " + std::to_string(options.ngram_min) +
                        ".." + std::to_string(options.ngram_max));
}

void check_token_ids(const Model& model, std::span<const int64_t> ids) {
  const int64_t vocab = model.vocab_size();
  for (int64_t id : ids)
    if (id < 0 || (vocab > 0 && id >= vocab))
      fail("generate", "token id " + std::to_string(id) + " is outside the vocabulary (size " +
                           std::to_string(vocab) + ")");
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One row's progress through a request.
struct RowRun {
  GenerationResult result;
  Sampler sampler;
  std::optional<TextStream> text;
  int64_t next_token = -1;  // chosen, not yet run
  bool done = false;
};

class BatchLoop {
 public:
  BatchLoop(Generator& generator, const GenerationOptions& options, const Tokenizer* tokenizer,
            const TokenCallback& on_token)
      : g_(generator), options_(options), tokenizer_(tokenizer), on_token_(on_token), spec_(generator, options.speculative) {
    if (options.stop_at_eos) stop_ids_ = g_.model().config().eos_token_ids;
    stop_ids_.insert(stop_ids_.end(), options.extra_stop_ids.begin(), options.extra_stop_ids.end());
  }

  std::vector<GenerationResult> run(std::span<const std::vector<int64_t>> feeds) {
    for (size_t b = 0; b < feeds.size(); ++b) check_feed(int64_t(b), feeds[b]);
    for (size_t b = 0; b < feeds.size(); ++b) rows_.push_back(start_row(int64_t(b), feeds[b]));
    try {
      for (size_t b = 0; b < feeds.size(); ++b) prefill(int64_t(b), feeds[b]);
      decode();
    } catch (...) {
      // A failed run or a throwing callback: no row may stay parked.
      for (int64_t b = 0; b < g_.batch(); ++b) g_.state().unpark(b);
      throw;
    }
    std::vector<GenerationResult> results;
    for (RowRun& r : rows_) results.push_back(std::move(r.result));
    return results;
  }

 private:
  void check_feed(int64_t row, std::span<const int64_t> feed) const {
    if (feed.empty()) fail("generate", "the prompt is empty");
    check_token_ids(g_.model(), feed);
    const int64_t before = g_.state().length(row), total = before + int64_t(feed.size());
    if (total > g_.max_length()) {
      std::string what = "the prompt (" + std::to_string(feed.size()) + " tokens";
      if (before > 0) what += " after " + std::to_string(before) + " in the conversation";
      fail("generate", what + ") does not fit the maximum length " + std::to_string(g_.max_length()) +
                           " (the model's context length is " + std::to_string(g_.model().config().context_length) +
                           ")");
    }
  }

  RowRun start_row(int64_t row, std::span<const int64_t> feed) {
    RowRun r{GenerationResult{}, Sampler(options_.sampling, g_.vocab(), options_.sampling.seed + uint64_t(row)),
             std::nullopt};
    std::vector<int64_t> context = g_.state().tokens(row);
    context.insert(context.end(), feed.begin(), feed.end());
    r.sampler.begin(context);
    if (tokenizer_) r.text.emplace(*tokenizer_, options_.stop_strings);
    r.result.prompt_tokens = r.result.prefilled_tokens = int64_t(feed.size());
    r.result.generated_ids.reserve(size_t(std::min(options_.max_new_tokens, g_.max_length() + 1)));
    r.result.vocab = g_.vocab();
    return r;
  }

  void collect(RowRun& r, const float* row) {
    if (!options_.collect_logits) return;
    r.result.logits.insert(r.result.logits.end(), row, row + g_.vocab());
    ++r.result.logits_rows;
  }

  // Runs the feed through the row, then chooses its first token.
  void prefill(int64_t row, std::span<const int64_t> feed) {
    RowRun& r = rows_[size_t(row)];
    const size_t chunk = options_.prefill_chunk > 0 ? size_t(options_.prefill_chunk) : feed.size();
    const auto start = Clock::now();
    LogitsView last;
    for (size_t begin = 0; begin < feed.size(); begin += chunk) {
      const int64_t position = g_.state().length(row), count = int64_t(std::min(chunk, feed.size() - begin));
      last = g_.run_row(row, feed.subspan(begin, size_t(count)), options_.collect_logits);
      spec_.observe(row, position, 0, count);
      ++r.result.prefill_runs;
      for (int64_t i = 0; options_.collect_logits && i < last.rows; ++i) collect(r, last.row(0, i));
    }
    r.result.prefill_seconds = seconds_since(start);
    if (options_.max_new_tokens == 0) {
      r.done = true;
      return;
    }
    accept(row, r.sampler.next(last.row(0, last.rows - 1)));
  }

  bool is_stop_id(int64_t token) const {
    return std::find(stop_ids_.begin(), stop_ids_.end(), token) != stop_ids_.end();
  }

  // `ran`: the tokens the row had run when `token` was chosen (its state's
  // length, except inside a verify run).
  void accept(int64_t row, int64_t token, std::optional<int64_t> ran = std::nullopt) {
    RowRun& r = rows_[size_t(row)];
    r.result.generated_ids.push_back(token);
    r.next_token = token;
    std::string piece = r.text ? r.text->push(token) : std::string();

    std::optional<StopReason> stop;
    if (is_stop_id(token)) stop = StopReason::Eos;
    else if (r.text && r.text->stopped()) stop = StopReason::StopString;
    else if (int64_t(r.result.generated_ids.size()) >= options_.max_new_tokens) stop = StopReason::MaxNewTokens;
    else if (ran.value_or(g_.state().length(row)) >= g_.max_length()) stop = StopReason::Length;
    if (stop) {
      r.done = true;
      r.result.stop_reason = *stop;
      if (r.text) piece += r.text->finish();
    }
    if (r.text) r.result.text = r.text->text();
    if (on_token_ && !on_token_(row, token, piece) && !r.done) {
      r.done = true;
      r.result.stop_reason = StopReason::Cancelled;
    }
  }

  bool all_done() const {
    return std::all_of(rows_.begin(), rows_.end(), [](const RowRun& r) { return r.done; });
  }

  // Every row that is not done gets one more token per round, or several: a
  // row with guesses (speculate) checks them in a run of its own, the others
  // take one batched step together.
  void decode() {
    const int64_t batch = g_.batch();
    std::vector<int64_t> tokens(size_t(batch), 0);
    std::vector<std::vector<int64_t>> drafts(static_cast<size_t>(batch));
    while (!all_done()) {
      bool any_plain = false;
      for (int64_t b = 0; b < batch; ++b) {
        const RowRun& r = rows_[size_t(b)];
        drafts[size_t(b)] = r.done ? std::vector<int64_t>{} : draft_for(b);
        any_plain |= !r.done && drafts[size_t(b)].empty();
      }
      if (any_plain) {  // the rows that sit the step out are parked through it
        for (int64_t b = 0; b < batch; ++b) {
          const bool sits_out = rows_[size_t(b)].done || !drafts[size_t(b)].empty();
          if (sits_out) g_.state().park(b);
          tokens[size_t(b)] = sits_out ? 0 : rows_[size_t(b)].next_token;
        }
        step(tokens, drafts);
      }
      for (int64_t b = 0; b < batch; ++b) {
        if (drafts[size_t(b)].empty()) continue;
        g_.state().unpark(b);
        verify(b, drafts[size_t(b)]);
      }
    }
    for (int64_t b = 0; b < batch; ++b) g_.state().unpark(b);
  }

  // One batched decode step for the rows without guesses.
  void step(std::span<const int64_t> tokens, const std::vector<std::vector<int64_t>>& drafts) {
    const auto start = Clock::now();
    LogitsView logits = g_.step(tokens);
    const double seconds = seconds_since(start);
    for (int64_t b = 0; b < g_.batch(); ++b) {
      RowRun& r = rows_[size_t(b)];
      if (r.done || !drafts[size_t(b)].empty()) continue;
      spec_.observe(b, g_.state().length(b) - 1, b, 1);
      ++r.result.decode_steps;
      r.result.decode_seconds += seconds;
      collect(r, logits.row(b, 0));
      accept(b, r.sampler.next(logits.row(b, 0)));
    }
  }

  // The guesses for row b's next tokens (after its chosen, not yet run
  // token); empty = a plain step.
  std::vector<int64_t> draft_for(int64_t b) {
    if (!spec_.active()) return {};
    RowRun& r = rows_[size_t(b)];
    double seconds = 0;
    std::vector<int64_t> guesses =
        spec_.draft(b, r.next_token, options_.max_new_tokens - int64_t(r.result.generated_ids.size()), &seconds);
    r.result.draft_seconds += seconds;
    r.result.decode_seconds += seconds;
    return guesses;
  }

  // Row b runs its chosen token and the k guesses in one run
  // (RowSpeculator::verify): row i of its logits is what the row chooses
  // after the token and i guesses. Its sampler chooses from row 0 on; each
  // choice that equals the next guess lets the following row stand, the first
  // that does not ends the round (it is the row's correction). So every token
  // is the one the plain loop would choose from the same logits with the same
  // random draws.
  void verify(int64_t b, std::span<const int64_t> draft) {
    RowRun& r = rows_[size_t(b)];
    const int64_t k = int64_t(draft.size()), before = g_.state().length(b);
    const auto start = Clock::now();
    ++r.result.verify_runs;
    r.result.drafted_tokens += k;
    const RowSpeculator::Round round = spec_.verify(b, r.next_token, draft, [&](int64_t i, const float* logits) {
      collect(r, logits);
      const bool take_guess = options_.speculative.accept_every_draft && i < k;
      const int64_t token = take_guess ? draft[size_t(i)] : r.sampler.next(logits);
      accept(b, token, before + 1 + i);
      const bool kept = i < k && token == draft[size_t(i)];
      if (kept) ++r.result.accepted_tokens;
      return kept && !r.done;
    });
    if (round.replayed > 0) {
      ++r.result.replay_runs;
      r.result.replayed_tokens += round.replayed;
    }
    r.result.decode_steps += round.chosen;
    r.result.decode_seconds += seconds_since(start);
  }

  Generator& g_;
  const GenerationOptions& options_;
  const Tokenizer* tokenizer_;
  const TokenCallback& on_token_;
  std::vector<int64_t> stop_ids_;
  std::vector<RowRun> rows_;
  RowSpeculator spec_;
};

}  // namespace

std::vector<GenerationResult> generate_rows(Generator& generator, std::span<const std::vector<int64_t>> feeds,
                                            const GenerationOptions& options, const Tokenizer* tokenizer,
                                            const TokenCallback& on_token) {
  if (int64_t(feeds.size()) != generator.batch())
    fail("generate", std::to_string(feeds.size()) + " prompts for a batch of " + std::to_string(generator.batch()));
  if (options.max_new_tokens < 0) fail("generate", "the number of new tokens is negative");
  if (options.prefill_chunk < 0) fail("generate", "the prefill chunk size is negative");
  if (!options.stop_strings.empty() && !tokenizer) fail("generate", "stop strings need a tokenizer");
  validate_sampling(options.sampling);
  validate_speculative(options.speculative);
  BatchLoop loop(generator, options, tokenizer, on_token);
  return loop.run(feeds);
}

}  // namespace deltagen
