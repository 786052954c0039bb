// Drafting with the checkpoint's multi-token-prediction head (mtp.onnx,
// docs/speculative.md; the math is ReferenceModel::mtp_forward).
//
// Slot p of the head reads the decoder's hidden state at position p (after
// its final norm: the decoder's `hidden_states` output) and the token at
// p + 1, and guesses the token at p + 2. The head has one attention layer
// with a KV cache of its own, one entry per slot. So, for a row that has run
// positions 0..n-1 and chosen (not yet run) token t_n:
//
//   1. the slots the head has not seen yet, up to n - 1, run in one head run
//      (their hidden states were kept by observe(); their tokens are the
//      row's, shifted by one, ending with t_n): the last one guesses t_{n+1};
//   2. each further guess is one head run of one slot at the next position,
//      on the head's own hidden_states_out and the previous guess;
//   3. the head's cache keeps the slots of step 1 only: the entries of step 2
//      came from the head's hidden, not the decoder's, and are overwritten by
//      the next round's step 1 (vLLM and onnxruntime-genai do the same).
//
// Guesses are the head's argmax: tokens, not distributions, so the loop's
// check (the row's own sampler, runtime/generation.cpp) keeps the output
// exact for every sampler.
//
// The head's cache holds what the drafter observed: the positions run since
// it was made (one generate_rows call: a turn's new prompt and its reply).
// Earlier turns are not in it; the guesses are then made with less context,
// the output is the same.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <onnxruntime_cxx_api.h>

#include "runtime/session.h"

namespace deltagen {

class MtpDrafter {
 public:
  static constexpr const char* kDecoderHidden = "hidden_states";  // the decoder output the head reads
  static constexpr int64_t kMaxSlotsPerRun = 256;  // bounds a long prompt's attention scratch in the head

  // Loads the head (Model::mtp_session) and checks it fits the decoder: its
  // hidden_states input as wide as, and of the dtype of, the decoder's
  // hidden_states output. Throws Error naming the file otherwise.
  MtpDrafter(Model& model, int64_t batch, int64_t max_length);

  // The decoder ran `rows` positions of `row` from main position `position`;
  // `hidden` holds their hidden_states (rows x hidden_row_bytes()). A
  // position before the ones kept rolls the row's head cache back to it.
  void observe(int64_t row, int64_t position, const std::byte* hidden, int64_t rows);

  // Up to k guesses for what follows `context` (the row's run tokens, then
  // its chosen token). Empty when the row has no new hidden states (the
  // decoder ran nothing since the last draft).
  std::vector<int64_t> draft(int64_t row, std::span<const int64_t> context, int64_t k);

  // A row starts over (a new sequence in it), or takes another's place (its
  // cache buffers are kept for reuse).
  void reset_row(int64_t row);
  void move_row(int64_t from, int64_t to);

  size_t hidden_row_bytes() const { return hidden_row_bytes_; }

 private:
  struct Row {
    int64_t start = -1;  // main position of slot 0; -1 = nothing observed yet
    int64_t slots = 0;   // slots in the head's cache (from the decoder's hidden states)
    std::vector<std::byte> pending;  // hidden states of positions start + slots ... not yet run
    std::vector<std::byte> key, value;  // [1, kv_heads, capacity, head_dim], allocated on first use
  };

  // Runs `ids.size()` slots of `r` at main positions from `position`, their
  // KV at cache index `past`; returns the last slot's argmax and leaves its
  // hidden_states_out row in last_hidden_.
  int64_t run_head(Row& r, std::span<const int64_t> ids, const std::byte* hidden, int64_t position, int64_t past);
  Ort::Value kv_view(std::vector<std::byte>& bytes);
  int64_t pending_rows(const Row& r) const { return int64_t(r.pending.size() / hidden_row_bytes_); }

  Ort::Session& head_;
  int64_t max_length_;
  int64_t kv_heads_ = 0, head_dim_ = 0;
  ONNXTensorElementDataType kv_dtype_ = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  ONNXTensorElementDataType hidden_dtype_ = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  int64_t hidden_size_ = 0;
  size_t hidden_row_bytes_ = 0;
  std::vector<Row> rows_;
  Ort::MemoryInfo cpu_;
  std::vector<int64_t> ids_, mask_, positions_;
  std::vector<std::byte> hidden_in_, last_hidden_;
};

}  // namespace deltagen
