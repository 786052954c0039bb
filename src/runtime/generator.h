// Running the model over a batch of sequences with a preallocated, in-place
// hybrid state (runtime/state.h).
//
// Batching: GroupQueryAttention on the CPU accepts S > 1 with past context
// only for batch 1, and left padding would push pad tokens through the
// linear-attention recurrence. So prompts are run one row at a time
// (run_row: batch-1 views of that row's memory, any length, any number of
// chunks) and decoding runs every row at once, one token each (step): rows of
// different lengths need no padding because GQA reads each row's own length
// from seqlens_k (= its attention-mask sum - 1).
//
// In the decode loop nothing is allocated: the inputs, the logits and the
// state live in buffers sized once; a step only writes the new ids, mask and
// positions and wraps them in tensor views.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <onnxruntime_cxx_api.h>

#include "runtime/session.h"
#include "runtime/state.h"
#include "vision/mrope_positions.h"

namespace deltagen {

// Logits of one run as fp32, [batch, rows, vocab], in a buffer the Generator
// owns: valid until its next run.
struct LogitsView {
  const float* data = nullptr;
  int64_t batch = 0, rows = 0, vocab = 0;

  const float* row(int64_t b, int64_t r) const { return data + (b * rows + r) * vocab; }
};

// An owned copy of a LogitsView.
struct Logits {
  int64_t batch = 0, rows = 0, vocab = 0;
  std::vector<float> data;

  const float* row(int64_t b, int64_t r) const { return data.data() + (b * rows + r) * vocab; }
};

// The longest sequence a Generator serves unless told otherwise: the model's
// context length, capped so that the KV cache of a 256k-context model is not
// allocated in full by default.
constexpr int64_t kDefaultMaxLength = 4096;
int64_t default_max_length(const Model& model);

// The images of a prompt about to be run on a row of a --vision model: the
// feature rows of its image-pad tokens in order (Model::encode_image of each
// image, concatenated) and the 3-D positions of every prompt token
// (mrope_positions, started at Generator::next_position(row)).
struct RowImages {
  std::vector<float> features;  // [rows, hidden]
  int64_t rows = 0;
  MropePositions positions;
};

class Generator {
 public:
  // max_length: tokens per row the state holds (0 = default_max_length);
  // at most the model's context length.
  explicit Generator(Model& model, int64_t batch = 1, int64_t max_length = 0);

  // Runs `ids` through row `row` alone and appends them to it. Returns the
  // logits of every fed position [1, ids, vocab] or of the last one [1, 1, vocab].
  LogitsView run_row(int64_t row, std::span<const int64_t> ids, bool all_positions);

  // A --vision model: the next run_row calls on `row` feed `images` with the
  // prompt that follows: its tokens take images.positions (in order, from the
  // row's current length) and its image-pad tokens the feature rows, however
  // the prompt is split into runs. Once the prompt is through, later tokens
  // sit at index + the prompt's rope_delta in all three streams.
  void attach_images(int64_t row, RowImages images);
  void detach_images(int64_t row) { multimodal_.at(size_t(row)).images.reset(); }  // a request that failed
  // Where the next token of `row` sits in the rotary position streams: its
  // length + the rope_delta its images so far added (the `start` of
  // mrope_positions for the next prompt).
  int64_t next_position(int64_t row) const;
  // The row's rope delta (what a snapshot keeps: StateSnapshot::rope_delta),
  // and setting it after restoring a snapshot into the row.
  int64_t rope_delta(int64_t row) const { return multimodal_.at(size_t(row)).rope_delta; }
  void set_rope_delta(int64_t row, int64_t delta) { multimodal_.at(size_t(row)).rope_delta = delta; }
  // HybridState::copy_row / reset_row, with the row's images and rope delta.
  void copy_row(int64_t from, int64_t to);
  void reset_row(int64_t row);

  // One decode step for rows [0, tokens.size()) (the whole batch, or its
  // first rows: the rest are not run at all): tokens[b] is appended to row b,
  // except for parked rows (HybridState::park), which are fed a dummy token
  // that changes nothing they keep. Returns [tokens.size(), 1, vocab].
  LogitsView step(std::span<const int64_t> tokens);

  // ids [batch, seq] row-major, the same count for every row: a decode step
  // when seq == 1 (and batch > 1), else every row through run_row.
  Logits forward(std::span<const int64_t> ids, bool all_positions);

  // Extra graph outputs to fetch on every later run (e.g. a --layer-outputs
  // build's ModelIo::layer_outputs), in ONNX Runtime's memory: fetched(i) is
  // names[i] of the last run, valid until the next one. Call once, before the
  // first run: the bindings keep them from then on. Throws Error for a name
  // the model does not output.
  void fetch_outputs(std::vector<std::string> names);
  // One more output to fetch from the next run on (any time; speculative
  // drafting with the MTP head adds the decoder's hidden_states): its index
  // for fetched(). A name already fetched keeps its index.
  size_t fetch_output(const std::string& name);
  const Ort::Value& fetched(size_t i) const { return fetched_.at(i); }
  size_t fetched_count() const { return fetched_.size(); }

  void reset() {
    state_.reset();
    for (auto& m : multimodal_) m = RowMultimodal{};
  }
  const HybridState& state() const { return state_; }
  HybridState& state() { return state_; }
  Model& model() { return model_; }
  const Model& model() const { return model_; }
  int64_t batch() const { return state_.batch(); }
  int64_t max_length() const { return state_.max_length(); }
  int64_t vocab() const { return vocab_; }

 private:
  // A tensor viewing the first count(shape) elements of `buffer`.
  Ort::Value view(std::vector<int64_t>& buffer, const std::vector<int64_t>& shape);
  Ort::Value logits_view(int64_t batch, int64_t rows);
  void bind_inputs(Ort::IoBinding& binding, int64_t batch, int64_t seq, int64_t width,
                   const float* features = nullptr, int64_t feature_rows = 0);
  // positions_ for row `row`'s run of `seq` tokens after `past` (batch 1), and
  // the feature rows its image pads take.
  void row_positions(int64_t row, int64_t past, std::span<const int64_t> ids, const float** features,
                     int64_t* feature_rows);
  LogitsView run(Ort::IoBinding& binding, int64_t batch, int64_t rows, bool last_row_only);
  void collect_fetched(Ort::IoBinding& binding);

  Model& model_;
  int64_t vocab_;
  HybridState state_;
  Ort::MemoryInfo cpu_;
  Ort::RunOptions run_options_;
  Ort::IoBinding batch_binding_;             // the whole state, bound once
  std::vector<Ort::IoBinding> row_bindings_;  // one row's state each (batch > 1 only), bound once
  std::map<int64_t, Ort::IoBinding> first_rows_bindings_;  // by row count < batch, bound on first use
  // Input and output buffers, sized for the largest run so far (a decode step never grows them).
  std::vector<int64_t> ids_, mask_, positions_;  // positions_: [3][B][S] for an M-RoPE model
  std::vector<int64_t> logits_to_keep_ = {0};     // a ModelIo::has_logits_to_keep model's [1] input
  Ort::Value embeds_{nullptr};  // a --vision model's inputs_embeds of the current run
  // Per row of a --vision model: the images attached to the prompt being run
  // (from sequence index begin), and the rope delta of the tokens after it.
  struct RowMultimodal {
    int64_t begin = 0, feature_cursor = 0;
    std::optional<RowImages> images;
    int64_t rope_delta = 0;
  };
  std::vector<RowMultimodal> multimodal_;
  std::vector<std::byte> logits_raw_;  // the model's logits dtype
  std::vector<float> logits_f32_;      // the rows handed out, when the model's logits are not fp32
  std::vector<std::string> fetch_names_;  // fetch_outputs()
  std::vector<Ort::Value> fetched_;       // ... their values from the last run
  bool ran_ = false;
};

// ---- the one-sequence greedy loop (kept for the golden and round-trip tests) ----

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
  int64_t decode_steps = 0;
  double decode_seconds = 0;
  bool stopped_at_eos = false;

  double prompt_tokens_per_second() const;
  double generation_tokens_per_second() const;
};

// Throws Error unless the prompt is non-empty, every id is inside the
// vocabulary and prompt + max_new_tokens fits the model's context length.
void check_request(const Model& model, std::span<const int64_t> prompt, int64_t max_new_tokens);

// Greedy decoding for batch 1 from the generator's current state.
GenerateResult generate_greedy(Generator& generator, std::span<const int64_t> prompt, const GenerateOptions& options);

}  // namespace deltagen
