// The generation loop: prefill (in one run or in chunks that carry the
// state) and greedy decode, one token per run.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include <onnxruntime_cxx_api.h>

#include "runtime/session.h"
#include "runtime/state.h"

namespace deltagen {

// Logits of some positions of one run, as fp32: data is [batch, rows, vocab].
struct Logits {
  int64_t batch = 0, rows = 0, vocab = 0;
  std::vector<float> data;

  const float* row(int64_t b, int64_t r) const { return data.data() + (b * rows + r) * vocab; }
};

// Runs the model step by step over one batch of sequences, carrying the
// hybrid state between runs. Not thread-safe; one Generator per sequence batch.
class Generator {
 public:
  explicit Generator(Model& model, int64_t batch = 1);

  // Feeds ids [batch, seq] (row-major; seq = ids.size() / batch) at the
  // current position and advances the state by seq tokens. Returns the logits
  // of every fed position, or of the last position only.
  Logits forward(std::span<const int64_t> ids, bool all_positions);

  void reset() { state_.reset(); }
  const HybridState& state() const { return state_; }
  Model& model() { return model_; }

 private:
  // An int64 tensor viewing `buffer` (kept alive by this object until the next run).
  Ort::Value view_tensor(std::vector<int64_t>& buffer, const std::vector<int64_t>& shape);
  void bind_inputs(std::span<const int64_t> ids, int64_t seq, std::vector<Ort::Value>& keep_alive);
  Logits read_logits(const Ort::Value& logits, bool all_positions) const;

  Model& model_;
  HybridState state_;
  Ort::MemoryInfo cpu_;
  Ort::IoBinding binding_;
  Ort::RunOptions run_options_;
  std::vector<int64_t> ids_, mask_, positions_;  // backing buffers of the input tensors
};

struct GenerateOptions {
  int64_t max_new_tokens = 0;
  int64_t prefill_chunk = 0;     // tokens per prefill run; 0 = the whole prompt at once
  bool collect_logits = false;   // keep every prompt row and every decode step's row
  bool stop_at_eos = false;      // stop after a token listed in genai_config's eos_token_id
};

struct GenerateResult {
  std::vector<int64_t> generated_ids;
  // With collect_logits: [prompt + decode_steps, vocab], the prompt rows, then
  // one row per decode step. Row prompt-1+j produced generated_ids[j].
  std::vector<float> logits;
  int64_t logits_rows = 0;
  int64_t vocab = 0;
  int64_t prompt_tokens = 0;
  int64_t prefill_runs = 0;
  double prefill_seconds = 0;
  int64_t decode_steps = 0;     // runs after the prefill (one per generated token but the last)
  double decode_seconds = 0;
  bool stopped_at_eos = false;

  double prompt_tokens_per_second() const;
  double generation_tokens_per_second() const;  // decode steps per second; 0 without any
};

// Throws Error unless the prompt is non-empty, every id is inside the
// vocabulary and prompt + max_new_tokens fits the model's context length.
void check_request(const Model& model, std::span<const int64_t> prompt, int64_t max_new_tokens);

// Greedy decoding (argmax, first index on ties) for batch 1, from the
// generator's current state (normally fresh).
GenerateResult generate_greedy(Generator& generator, std::span<const int64_t> prompt, const GenerateOptions& options);

int64_t argmax(const float* row, int64_t n);

}  // namespace deltagen
