#include "speculative/row_speculator.h"

#include <algorithm>
#include <chrono>

#include "runtime/generation.h"
#include "runtime/tensor.h"
#include "speculative/ngram_draft.h"

namespace deltagen {

RowSpeculator::RowSpeculator(Generator& generator, const SpeculativeOptions& options)
    : g_(generator), options_(options) {
  validate_speculative(options_);
  if (options_.method == SpeculativeMethod::Mtp && !options_.drafter) {
    mtp_.emplace(g_.model(), g_.batch(), g_.max_length());
    hidden_output_ = g_.fetch_output(MtpDrafter::kDecoderHidden);
  }
}

std::vector<int64_t> RowSpeculator::draft(int64_t row, int64_t next, int64_t tokens_left, double* seconds) {
  const int64_t room = std::min(tokens_left, g_.max_length() - g_.state().length(row)) - 1;
  const int64_t k = std::min(options_.draft_tokens, room);
  if (!active() || k < 1) return {};
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t>& tokens = g_.state().tokens(row);
  context_.assign(tokens.begin(), tokens.end());
  context_.push_back(next);
  std::vector<int64_t> guesses;
  if (options_.drafter) {
    guesses = options_.drafter(context_, k);
    if (int64_t(guesses.size()) > k) guesses.resize(size_t(k));
    check_token_ids(g_.model(), guesses);
  } else if (mtp_) {
    guesses = mtp_->draft(row, context_, k);
  } else {
    guesses = ngram_draft(context_, k, {.max_ngram = options_.ngram_max, .min_ngram = options_.ngram_min});
  }
  if (seconds) *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return guesses;
}

void RowSpeculator::observe(int64_t row, int64_t position, int64_t batch_index, int64_t rows) {
  if (!mtp_) return;
  const Ort::Value& hidden = g_.fetched(hidden_output_);
  const int64_t run_rows = tensor_shape(hidden)[1];
  const auto* data = static_cast<const std::byte*>(hidden.GetTensorRawData());
  mtp_->observe(row, position, data + size_t(batch_index * run_rows) * mtp_->hidden_row_bytes(), rows);
}

RowSpeculator::Round RowSpeculator::verify(int64_t row, int64_t next, std::span<const int64_t> draft,
                                           const Choose& choose) {
  const int64_t k = int64_t(draft.size()), before = g_.state().length(row);
  feed_.assign(1, next);
  feed_.insert(feed_.end(), draft.begin(), draft.end());
  g_.state().save_linear(row, saved_linear_);
  const LogitsView logits = g_.run_row(row, feed_, true);
  Round round;
  for (int64_t i = 0; i <= k; ++i) {
    ++round.chosen;
    if (!choose(i, logits.row(0, i)) || i == k) break;
  }
  if (round.chosen < 1 + k) {  // roll back to `next` and the kept guesses
    g_.state().restore_linear(row, saved_linear_);
    g_.state().truncate(row, before);
    g_.run_row(row, std::span<const int64_t>(feed_).first(size_t(round.chosen)), false);
    round.replayed = round.chosen;
  }
  observe(row, before, 0, round.chosen);  // the last run's rows: the replay's, or all of the verify run's
  return round;
}

void RowSpeculator::reset_row(int64_t row) {
  if (mtp_) mtp_->reset_row(row);
}

void RowSpeculator::move_row(int64_t from, int64_t to) {
  if (mtp_) mtp_->move_row(from, to);
}

}  // namespace deltagen
