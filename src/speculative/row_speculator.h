// Speculative decoding for the rows of a Generator (docs/speculative.md):
// what the generation loop (runtime/generation.cpp) and the server's
// scheduler (serve/scheduler.cpp) share. A row's guesses come from its
// drafter (n-gram lookup, the MTP head, or a caller's own); one run of the
// row's chosen token and its guesses checks them, and the row keeps exactly
// the tokens its own sampler chose.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "deltagen/options.h"
#include "runtime/generator.h"
#include "speculative/mtp_draft.h"

namespace deltagen {

class RowSpeculator {
 public:
  // With SpeculativeMethod::Mtp (and no drafter of the caller's own) this
  // loads the model's head and has the generator fetch the decoder's
  // hidden_states from now on. Throws Error for options out of range or a
  // model without a head.
  RowSpeculator(Generator& generator, const SpeculativeOptions& options);

  bool active() const { return options_.active(); }

  // Guesses for what follows row `row`'s tokens and its chosen, not yet run
  // token `next`; empty = a plain step. At most draft_tokens, and no more
  // than the request (`tokens_left` to generate, `next` included) and the
  // row's maximum length leave room for: a verify run feeds 1 + k tokens and
  // can choose 1 + k. `seconds` (when given) gets the time spent.
  std::vector<int64_t> draft(int64_t row, int64_t next, int64_t tokens_left, double* seconds = nullptr);

  // After a run of the generator that appended `rows` positions to `row`
  // from `position` (row `batch_index` of the run's batch): the MTP head keeps
  // their hidden states. Every run of a row must be reported, except those
  // verify() makes (it reports its own).
  void observe(int64_t row, int64_t position, int64_t batch_index, int64_t rows);

  // Chooses the token after each position of a verify run: `i` = how many
  // guesses precede it, `logits` its row. Returns true to go on to the next
  // row (the choice equals guess i and the sequence goes on), false to end
  // the round with this token.
  using Choose = std::function<bool(int64_t i, const float* logits)>;

  // Runs `next` and `draft` through `row` in one run and calls `choose` for
  // rows 0, 1, ... until it returns false or row k is chosen. The row keeps
  // `next` and the guesses that stood: when fewer than all 1 + k tokens
  // stand, its linear states are put back and the kept tokens run again.
  // Returns the number of tokens chosen (1 .. 1 + k).
  struct Round {
    int64_t chosen = 0;    // tokens chosen (the last is the row's next, not run)
    int64_t replayed = 0;  // tokens run again after a miss (0 = no replay run)
  };
  Round verify(int64_t row, int64_t next, std::span<const int64_t> draft, const Choose& choose);

  // The row's drafter state follows the generator's rows (a server moves
  // sequences between rows and starts new ones in freed rows).
  void reset_row(int64_t row);
  void move_row(int64_t from, int64_t to);

 private:
  Generator& g_;
  SpeculativeOptions options_;
  std::optional<MtpDrafter> mtp_;
  size_t hidden_output_ = 0;  // the decoder's hidden_states among g_.fetched()
  std::vector<int64_t> context_, feed_;  // scratch, reused every round
  std::vector<std::byte> saved_linear_;
};

}  // namespace deltagen
