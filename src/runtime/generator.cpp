#include "runtime/generator.h"

#include <algorithm>
#include <cstring>

#include "runtime/generation.h"
#include "runtime/tensor.h"
#include "deltagen/error.h"
#include "util/half.h"

namespace deltagen {

int64_t default_max_length(const Model& model) {
  const int64_t context = model.config().context_length;
  return context > 0 ? std::min(context, kDefaultMaxLength) : kDefaultMaxLength;
}

namespace {

int64_t checked_max_length(const Model& model, int64_t requested) {
  if (requested < 0) fail("runtime", "the maximum length must not be negative");
  if (requested == 0) return default_max_length(model);
  const int64_t context = model.config().context_length;
  if (context > 0 && requested > context)
    fail("runtime", "maximum length " + std::to_string(requested) + " exceeds the model's context length " +
                        std::to_string(context));
  return requested;
}

int64_t checked_vocab(const Model& model) {
  if (model.vocab_size() <= 0) fail("model", "the vocabulary size is unknown (no static logits dimension, none in genai_config.json)");
  return model.vocab_size();
}

// The graph tells GQA each row's length only through the attention mask.
void require_attention_mask(const ModelIo& io) {
  if (!io.full_attention_layers().empty() && !io.has_attention_mask)
    fail("model", "has full-attention layers but no attention_mask input");
}

template <class T>
void ensure_size(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

Generator::Generator(Model& model, int64_t batch, int64_t max_length)
    : model_(model),
      vocab_(checked_vocab(model)),
      state_(model.io(), batch, checked_max_length(model, max_length), &model),
      cpu_(Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault)),
      batch_binding_(model.session()) {
  require_attention_mask(model.io());
  state_.bind_all(batch_binding_);
  if (batch > 1) {
    for (int64_t row = 0; row < batch; ++row) {
      row_bindings_.emplace_back(model.session());
      state_.bind_row(row_bindings_.back(), row);
    }
  }
  // Everything a decode step touches, at its final size.
  ids_.resize(size_t(batch));
  positions_.resize(size_t(3 * batch));
  multimodal_.resize(size_t(batch));
  mask_.resize(size_t(batch * state_.kv_capacity()));
  logits_raw_.resize(size_t(batch * vocab_) * float_element_size(model.io().logits_dtype));
  if (model.io().logits_dtype != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) logits_f32_.resize(size_t(batch * vocab_));
}

Ort::Value Generator::view(std::vector<int64_t>& buffer, const std::vector<int64_t>& shape) {
  size_t count = 1;
  for (int64_t d : shape) count *= size_t(d);
  return Ort::Value::CreateTensor<int64_t>(cpu_, buffer.data(), count, shape.data(), shape.size());
}

Ort::Value Generator::logits_view(int64_t batch, int64_t rows) {
  const ONNXTensorElementDataType dtype = model_.io().logits_dtype;
  const size_t bytes = size_t(batch * rows * vocab_) * float_element_size(dtype);
  ensure_size(logits_raw_, bytes);
  const std::vector<int64_t> shape = {batch, rows, vocab_};
  return Ort::Value::CreateTensor(cpu_, logits_raw_.data(), bytes, shape.data(), shape.size(), dtype);
}

void Generator::bind_inputs(Ort::IoBinding& binding, int64_t batch, int64_t seq, int64_t width,
                            const float* features, int64_t feature_rows) {
  const ModelIo& io = model_.io();
  if (io.has_inputs_embeds) {
    embeds_ = model_.embed(ids_.data(), batch, seq, features, feature_rows);
    binding.BindInput("inputs_embeds", embeds_);
  } else {
    binding.BindInput("input_ids", view(ids_, {batch, seq}));
  }
  if (io.has_attention_mask) binding.BindInput("attention_mask", view(mask_, {batch, width}));
  if (io.has_position_ids) {
    if (io.mrope_positions) binding.BindInput("position_ids", view(positions_, {3, batch, seq}));
    else binding.BindInput("position_ids", view(positions_, {batch, seq}));
  }
}

void Generator::attach_images(int64_t row, RowImages images) {
  if (row < 0 || row >= batch()) fail("runtime", "row " + std::to_string(row) + " is outside the batch");
  if (!model_.has_vision()) fail("runtime", "the model takes no images (build it with --vision)");
  if (images.rows * model_.hidden_size() != int64_t(images.features.size()))
    fail("runtime", "image features are not [rows, hidden]");
  RowMultimodal& m = multimodal_[size_t(row)];
  if (state_.length(row) == 0) m.rope_delta = 0;  // a reset row starts over
  m.begin = state_.length(row);
  m.feature_cursor = 0;
  m.images = std::move(images);
}

int64_t Generator::next_position(int64_t row) const {
  const RowMultimodal& m = multimodal_.at(size_t(row));
  const int64_t length = state_.length(row);
  return length == 0 ? 0 : length + m.rope_delta;
}

void Generator::copy_row(int64_t from, int64_t to) {
  if (from == to) return;
  state_.copy_row(from, to);
  multimodal_.at(size_t(to)) = multimodal_.at(size_t(from));
}

void Generator::reset_row(int64_t row) {
  state_.reset_row(row);
  multimodal_.at(size_t(row)) = RowMultimodal{};
}

// Token past + s of `row` takes the attached prompt's (T, H, W) position
// while inside it, else past + s + the row's rope delta in all three streams
// (plain RoPE positions for a text model, whose delta is 0).
void Generator::row_positions(int64_t row, int64_t past, std::span<const int64_t> ids, const float** features,
                              int64_t* feature_rows) {
  const int64_t seq = int64_t(ids.size());
  const bool mrope = model_.io().mrope_positions;
  ensure_size(positions_, size_t(mrope ? 3 * seq : seq));
  RowMultimodal& m = multimodal_[size_t(row)];
  if (past == 0 && (!m.images || m.begin != 0)) m.rope_delta = 0;
  *features = nullptr;
  *feature_rows = 0;
  const MropePositions* p = m.images ? &m.images->positions : nullptr;
  for (int64_t s = 0; s < seq; ++s) {
    const int64_t in_prompt = past + s - m.begin;
    for (int64_t r = 0; r < (mrope ? 3 : 1); ++r) {
      int64_t pos = past + s + m.rope_delta;
      if (p && in_prompt >= 0 && in_prompt < p->size())
        pos = (r == 0 ? p->t : r == 1 ? p->h : p->w)[size_t(in_prompt)];
      positions_[size_t(r * seq + s)] = pos;
    }
  }
  if (!m.images) return;
  const int64_t pads = std::count(ids.begin(), ids.end(), model_.config().image_token_id);
  if (m.feature_cursor + pads > m.images->rows)
    fail("runtime", "the prompt has more image tokens than the attached images have features");
  *features = m.images->features.data() + m.feature_cursor * model_.hidden_size();
  *feature_rows = pads;
}

void Generator::fetch_outputs(std::vector<std::string> names) {
  if (ran_ || !fetch_names_.empty()) fail("runtime", "fetch_outputs() must be called once, before the first run");
  const auto outputs = model_.session().GetOutputNames();
  for (const auto& name : names)
    if (std::find(outputs.begin(), outputs.end(), name) == outputs.end())
      fail("model", "has no output " + name);
  fetch_names_ = std::move(names);
}

size_t Generator::fetch_output(const std::string& name) {
  if (auto it = std::find(fetch_names_.begin(), fetch_names_.end(), name); it != fetch_names_.end())
    return size_t(it - fetch_names_.begin());
  const auto outputs = model_.session().GetOutputNames();
  if (std::find(outputs.begin(), outputs.end(), name) == outputs.end()) fail("model", "has no output " + name);
  fetch_names_.push_back(name);
  return fetch_names_.size() - 1;
}

LogitsView Generator::run(Ort::IoBinding& binding, int64_t batch, int64_t rows, bool last_row_only) {
  if (model_.io().logits_last_position_only) {
    if (!last_row_only && rows > 1)
      fail("generate", "this model computes the logits of the last position only (built with a pruned lm_head), "
                       "so the prompt's logits are not available");
    rows = 1;
  }
  if (model_.io().has_logits_to_keep) {
    // Only batch-1 runs have several rows: 1 keeps each row's last position.
    logits_to_keep_[0] = last_row_only ? 1 : 0;
    binding.BindInput("logits_to_keep", view(logits_to_keep_, {1}));
    if (last_row_only) rows = 1;
  }
  binding.BindOutput("logits", logits_view(batch, rows));
  // ONNX Runtime allocates these (their shapes vary); binding a name again replaces it.
  for (const auto& name : fetch_names_) binding.BindOutput(name.c_str(), cpu_);
  ran_ = true;
  state_.before_run();
  try {
    model_.session().Run(run_options_, binding);
  } catch (const Ort::Exception& e) {
    state_.after_run();
    fail("model run", ort_error_line(e));
  }
  state_.after_run();
  if (!fetch_names_.empty()) collect_fetched(binding);
  // Only batch-1 runs have several rows, so "the last row" is one contiguous row.
  const int64_t first_row = last_row_only ? rows - 1 : 0;
  const int64_t out_rows = rows - first_row;
  const size_t begin = size_t(first_row * vocab_), count = size_t(batch * out_rows * vocab_);
  switch (model_.io().logits_dtype) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
      return {reinterpret_cast<const float*>(logits_raw_.data()) + begin, batch, out_rows, vocab_};
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: {
      ensure_size(logits_f32_, count);
      const bool f16 = model_.io().logits_dtype == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
      const auto* half = reinterpret_cast<const uint16_t*>(logits_raw_.data()) + begin;
      for (size_t i = 0; i < count; ++i) logits_f32_[i] = f16 ? f16_to_f32(half[i]) : bf16_to_f32(half[i]);
      return {logits_f32_.data(), batch, out_rows, vocab_};
    }
    default:
      fail("model output logits", "unsupported element type " + element_type_name(model_.io().logits_dtype));
  }
}

void Generator::collect_fetched(Ort::IoBinding& binding) {
  const std::vector<std::string> bound = binding.GetOutputNames();
  std::vector<Ort::Value> values = binding.GetOutputValues();
  fetched_.clear();
  for (const auto& name : fetch_names_) {
    auto it = std::find(bound.begin(), bound.end(), name);
    if (it == bound.end()) fail("model run", "output " + name + " was not fetched");
    fetched_.push_back(std::move(values[size_t(it - bound.begin())]));
  }
}

LogitsView Generator::run_row(int64_t row, std::span<const int64_t> ids, bool all_positions) {
  if (row < 0 || row >= batch()) fail("runtime", "row " + std::to_string(row) + " is outside the batch");
  if (ids.empty()) fail("runtime", "nothing to run");
  state_.unpark(row);
  const int64_t past = state_.length(row), seq = int64_t(ids.size());
  if (past + seq > max_length())
    fail("runtime", std::to_string(past) + " + " + std::to_string(seq) + " tokens exceed the maximum length " +
                        std::to_string(max_length()));

  ensure_size(ids_, size_t(seq));
  std::copy(ids.begin(), ids.end(), ids_.begin());
  const float* features = nullptr;
  int64_t feature_rows = 0;
  row_positions(row, past, ids, &features, &feature_rows);
  std::fill(mask_.begin(), mask_.begin() + (past + seq), 1);

  Ort::IoBinding& binding = batch() == 1 ? batch_binding_ : row_bindings_[size_t(row)];
  bind_inputs(binding, 1, seq, past + seq, features, feature_rows);
  LogitsView logits;
  try {
    logits = run(binding, 1, seq, !all_positions);
  } catch (const Error&) {
    state_.reset_row(row);  // the graph may have written part of the state in place
    throw;
  }
  state_.append(row, ids);
  RowMultimodal& m = multimodal_[size_t(row)];
  if (m.images) {
    m.feature_cursor += feature_rows;
    if (state_.length(row) >= m.begin + m.images->positions.size()) {  // the prompt is through
      m.rope_delta += m.images->positions.rope_delta;
      m.images.reset();
    }
  }
  return logits;
}

LogitsView Generator::step(std::span<const int64_t> tokens) {
  const int64_t batch = int64_t(tokens.size());
  if (batch < 1 || batch > this->batch()) fail("runtime", "a decode step needs one token per row it runs");
  int64_t width = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t length = state_.length(b);
    if (!state_.parked(b) && length >= max_length())
      fail("runtime", "row " + std::to_string(b) + " is full (maximum length " + std::to_string(max_length()) + ")");
    width = std::max(width, length + 1);
  }
  // Row b attends to its own length + 1 entries; the rest of its mask row is padding.
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t length = state_.length(b);
    ids_[size_t(b)] = state_.parked(b) ? 0 : tokens[size_t(b)];
    const int64_t position = length + multimodal_[size_t(b)].rope_delta;
    for (int64_t r = 0; r < (model_.io().mrope_positions ? 3 : 1); ++r) positions_[size_t(r * batch + b)] = position;
    int64_t* mask_row = mask_.data() + b * width;
    std::fill(mask_row, mask_row + length + 1, 1);
    std::fill(mask_row + length + 1, mask_row + width, 0);
  }
  Ort::IoBinding* binding = &batch_binding_;
  if (batch < this->batch()) {
    auto it = first_rows_bindings_.find(batch);
    if (it == first_rows_bindings_.end()) {
      it = first_rows_bindings_.emplace(batch, Ort::IoBinding(model_.session())).first;
      state_.bind_first_rows(it->second, batch);
    }
    binding = &it->second;
  }
  bind_inputs(*binding, batch, 1, width);
  LogitsView logits;
  try {
    logits = run(*binding, batch, 1, false);
  } catch (const Error&) {
    for (int64_t b = 0; b < batch; ++b) state_.reset_row(b);  // the graph may have written them in place
    throw;
  }
  for (int64_t b = 0; b < batch; ++b)
    if (!state_.parked(b)) state_.append(b, tokens.subspan(size_t(b), 1));
  return logits;
}

Logits Generator::forward(std::span<const int64_t> ids, bool all_positions) {
  const int64_t batch = this->batch();
  if (ids.empty() || int64_t(ids.size()) % batch != 0)
    fail("runtime", "forward() needs the same positive number of tokens for every batch row");
  const int64_t seq = int64_t(ids.size()) / batch;
  Logits out;
  out.batch = batch;
  out.vocab = vocab_;
  if (seq == 1 && batch > 1) {
    LogitsView v = step(ids);
    out.rows = 1;
    out.data.assign(v.data, v.data + batch * vocab_);
    return out;
  }
  out.rows = all_positions ? seq : 1;
  for (int64_t b = 0; b < batch; ++b) {
    LogitsView v = run_row(b, ids.subspan(size_t(b * seq), size_t(seq)), all_positions);
    out.data.insert(out.data.end(), v.data, v.data + v.rows * vocab_);
  }
  return out;
}

// ---- the one-sequence greedy loop ----------------------------------------------------

double GenerateResult::prompt_tokens_per_second() const {
  return prefill_seconds > 0 ? double(prompt_tokens) / prefill_seconds : 0.0;
}

double GenerateResult::generation_tokens_per_second() const {
  return decode_seconds > 0 ? double(decode_steps) / decode_seconds : 0.0;
}

void check_request(const Model& model, std::span<const int64_t> prompt, int64_t max_new_tokens) {
  if (prompt.empty()) fail("generate", "the prompt is empty");
  if (max_new_tokens < 0) fail("generate", "the number of new tokens is negative");
  check_token_ids(model, prompt);
  const int64_t context = model.config().context_length;
  // Compared without adding, so that a huge max_new_tokens cannot wrap around.
  if (context > 0 && (int64_t(prompt.size()) > context || max_new_tokens > context - int64_t(prompt.size())))
    fail("generate", "prompt (" + std::to_string(prompt.size()) + ") + new tokens (" +
                         std::to_string(max_new_tokens) + ") exceed the context length " + std::to_string(context));
}

GenerateResult generate_greedy(Generator& generator, std::span<const int64_t> prompt, const GenerateOptions& options) {
  if (generator.batch() != 1) fail("generate", "greedy generation supports batch size 1 only");
  if (options.prefill_chunk < 0) fail("generate", "the prefill chunk size is negative");
  check_request(generator.model(), prompt, options.max_new_tokens);

  GenerationOptions o;
  o.max_new_tokens = options.max_new_tokens;
  o.prefill_chunk = options.prefill_chunk;
  o.collect_logits = options.collect_logits;
  o.stop_at_eos = options.stop_at_eos;
  const std::vector<std::vector<int64_t>> feeds = {std::vector<int64_t>(prompt.begin(), prompt.end())};
  GenerationResult r = generate_rows(generator, feeds, o, nullptr, {}).at(0);

  GenerateResult out;
  out.generated_ids = std::move(r.generated_ids);
  out.logits = std::move(r.logits);
  out.logits_rows = r.logits_rows;
  out.vocab = generator.vocab();
  out.prompt_tokens = r.prompt_tokens;
  out.prefill_runs = r.prefill_runs;
  out.prefill_seconds = r.prefill_seconds;
  out.decode_steps = r.decode_steps;
  out.decode_seconds = r.decode_seconds;
  out.stopped_at_eos = r.stop_reason == StopReason::Eos;
  return out;
}

}  // namespace deltagen
