#include "runtime/generator.h"

#include <algorithm>
#include <chrono>

#include "runtime/tensor.h"
#include "util/error.h"

namespace deltagen {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool is_eos(const Model& model, int64_t token) {
  const auto& eos = model.config().eos_token_ids;
  return std::find(eos.begin(), eos.end(), token) != eos.end();
}

void append_row(GenerateResult& result, const float* row) {
  result.logits.insert(result.logits.end(), row, row + result.vocab);
  ++result.logits_rows;
}

}  // namespace

Generator::Generator(Model& model, int64_t batch)
    : model_(model),
      state_(model.io(), batch),
      cpu_(Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault)),
      binding_(model.session()) {}

Ort::Value Generator::view_tensor(std::vector<int64_t>& buffer, const std::vector<int64_t>& shape) {
  return Ort::Value::CreateTensor<int64_t>(cpu_, buffer.data(), buffer.size(), shape.data(), shape.size());
}

void Generator::bind_inputs(std::span<const int64_t> ids, int64_t seq, std::vector<Ort::Value>& keep_alive) {
  const int64_t batch = state_.batch();
  const int64_t past = state_.past_length();
  const ModelIo& io = model_.io();

  ids_.assign(ids.begin(), ids.end());
  keep_alive.push_back(view_tensor(ids_, {batch, seq}));
  binding_.BindInput("input_ids", keep_alive.back());

  if (io.has_attention_mask) {
    // No padding: every past and new position is attended to. The graph
    // derives GQA's seqlens_k and total_sequence_length from this mask.
    mask_.assign(size_t(batch * (past + seq)), 1);
    keep_alive.push_back(view_tensor(mask_, {batch, past + seq}));
    binding_.BindInput("attention_mask", keep_alive.back());
  }
  if (io.has_position_ids) {
    positions_.resize(size_t(batch * seq));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t s = 0; s < seq; ++s) positions_[size_t(b * seq + s)] = past + s;
    keep_alive.push_back(view_tensor(positions_, {batch, seq}));
    binding_.BindInput("position_ids", keep_alive.back());
  }
}

Logits Generator::read_logits(const Ort::Value& value, bool all_positions) const {
  const std::vector<int64_t> shape = tensor_shape(value);
  if (shape.size() != 3 || shape[0] != state_.batch())
    fail("model output logits", "unexpected shape");
  Logits logits;
  logits.batch = shape[0];
  logits.vocab = shape[2];
  const int64_t seq = shape[1];
  if (all_positions) {
    logits.rows = seq;
    logits.data = tensor_to_f32(value);
    return logits;
  }
  logits.rows = 1;
  for (int64_t b = 0; b < logits.batch; ++b) {
    auto row = tensor_to_f32(value, size_t((b * seq + seq - 1) * logits.vocab), size_t(logits.vocab));
    logits.data.insert(logits.data.end(), row.begin(), row.end());
  }
  return logits;
}

Logits Generator::forward(std::span<const int64_t> ids, bool all_positions) {
  const int64_t batch = state_.batch();
  if (ids.empty() || int64_t(ids.size()) % batch != 0)
    fail("runtime", "forward() needs the same positive number of tokens for every batch row");
  const int64_t seq = int64_t(ids.size()) / batch;

  binding_.ClearBoundInputs();
  binding_.ClearBoundOutputs();
  std::vector<Ort::Value> inputs;
  inputs.reserve(3);
  bind_inputs(ids, seq, inputs);
  binding_.BindOutput("logits", cpu_);  // first output; the state's presents follow in order
  state_.bind(binding_, cpu_);

  std::vector<Ort::Value> outputs;
  try {
    model_.session().Run(run_options_, binding_);
    outputs = binding_.GetOutputValues();
  } catch (const Ort::Exception& e) {
    fail("model run", ort_error_line(e));
  }
  // Drop the binding's references to the old state before it is replaced.
  binding_.ClearBoundInputs();
  binding_.ClearBoundOutputs();

  Logits logits = read_logits(outputs[0], all_positions);
  state_.advance(outputs.begin() + 1, seq);
  return logits;
}

double GenerateResult::prompt_tokens_per_second() const {
  return prefill_seconds > 0 ? double(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerateResult::generation_tokens_per_second() const {
  return decode_seconds > 0 ? double(decode_steps) / decode_seconds : 0.0;
}

int64_t argmax(const float* row, int64_t n) {
  return int64_t(std::max_element(row, row + n) - row);
}

void check_request(const Model& model, std::span<const int64_t> prompt, int64_t max_new_tokens) {
  if (prompt.empty()) fail("generate", "the prompt is empty");
  if (max_new_tokens < 0) fail("generate", "the number of new tokens is negative");
  const int64_t vocab = model.vocab_size();
  for (int64_t id : prompt) {
    if (id < 0 || (vocab > 0 && id >= vocab))
      fail("generate", "token id " + std::to_string(id) + " is outside the vocabulary (size " +
                           std::to_string(vocab) + ")");
  }
  const int64_t context = model.config().context_length;
  const int64_t total = int64_t(prompt.size()) + max_new_tokens;
  if (context > 0 && total > context)
    fail("generate", "prompt (" + std::to_string(prompt.size()) + ") + new tokens (" +
                         std::to_string(max_new_tokens) + ") exceed the context length " + std::to_string(context));
}

GenerateResult generate_greedy(Generator& generator, std::span<const int64_t> prompt, const GenerateOptions& options) {
  if (generator.state().batch() != 1) fail("generate", "greedy generation supports batch size 1 only");
  if (options.prefill_chunk < 0) fail("generate", "the prefill chunk size is negative");
  check_request(generator.model(), prompt, options.max_new_tokens);

  GenerateResult result;
  result.prompt_tokens = int64_t(prompt.size());

  // Prefill: the whole prompt, or chunks that carry the state between runs.
  const size_t chunk = options.prefill_chunk > 0 ? size_t(options.prefill_chunk) : prompt.size();
  Logits last;
  auto prefill_start = Clock::now();
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    auto piece = prompt.subspan(begin, std::min(chunk, prompt.size() - begin));
    last = generator.forward(piece, options.collect_logits);
    ++result.prefill_runs;
    result.vocab = last.vocab;
    if (options.collect_logits)
      for (int64_t r = 0; r < last.rows; ++r) append_row(result, last.row(0, r));
  }
  result.prefill_seconds = seconds_since(prefill_start);

  // Decode: each new token comes from the previous run's last row; the last
  // new token is never fed back.
  const float* next_row = last.row(0, last.rows - 1);
  while (int64_t(result.generated_ids.size()) < options.max_new_tokens) {
    const int64_t token = argmax(next_row, last.vocab);
    result.generated_ids.push_back(token);
    if (options.stop_at_eos && is_eos(generator.model(), token)) {
      result.stopped_at_eos = true;
      break;
    }
    if (int64_t(result.generated_ids.size()) == options.max_new_tokens) break;

    auto step_start = Clock::now();
    last = generator.forward(std::span<const int64_t>(&result.generated_ids.back(), 1), false);
    result.decode_seconds += seconds_since(step_start);
    ++result.decode_steps;
    next_row = last.row(0, 0);
    if (options.collect_logits) append_row(result, next_row);
  }
  return result;
}

}  // namespace deltagen
