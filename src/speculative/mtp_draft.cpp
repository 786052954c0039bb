#include "speculative/mtp_draft.h"

#include <algorithm>
#include <optional>
#include <string>

#include "deltagen/error.h"
#include "runtime/tensor.h"

namespace deltagen {

namespace {

const char* const kInputIds = "input_ids";
const char* const kHidden = "hidden_states";
const char* const kMask = "attention_mask";
const char* const kPositions = "position_ids";
const char* const kPastKey = "past_key_values.0.key";
const char* const kPastValue = "past_key_values.0.value";
const char* const kLogits = "logits";
const char* const kHiddenOut = "hidden_states_out";
const char* const kPresentKey = "present.0.key";
const char* const kPresentValue = "present.0.value";

struct TensorDecl {
  ONNXTensorElementDataType dtype;
  std::vector<int64_t> shape;
};

// The declared dtype and shape of an input (or output) of `session`, or
// nullopt when it has none of that name.
std::optional<TensorDecl> declared(const Ort::Session& session, const std::string& name, bool output) {
  const std::vector<std::string> names = output ? session.GetOutputNames() : session.GetInputNames();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) return std::nullopt;
  const size_t i = size_t(it - names.begin());
  Ort::TypeInfo type = output ? session.GetOutputTypeInfo(i) : session.GetInputTypeInfo(i);
  auto info = type.GetTensorTypeAndShapeInfo();
  return TensorDecl{info.GetElementType(), info.GetShape()};
}

// The index of the largest of `count` float/float16/bfloat16 values.
int64_t argmax(const Ort::Value& logits, size_t begin, size_t count) {
  const std::vector<float> row = tensor_to_f32(logits, begin, count);
  return int64_t(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

MtpDrafter::MtpDrafter(Model& model, int64_t batch, int64_t max_length)
    : head_(model.mtp_session()),
      max_length_(max_length),
      rows_(size_t(batch)),
      cpu_(Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault)) {
  const std::string file = (model.dir() / model.config().mtp_filename).string();
  for (const char* name : {kInputIds, kHidden, kMask, kPositions, kPastKey, kPastValue})
    if (!declared(head_, name, false)) fail(file, std::string("has no input ") + name + " (not a deltagen MTP head)");
  for (const char* name : {kLogits, kHiddenOut, kPresentKey, kPresentValue})
    if (!declared(head_, name, true)) fail(file, std::string("has no output ") + name + " (not a deltagen MTP head)");

  const std::string decoder_file = (model.dir() / model.config().model_filename).string();
  const auto decoder_hidden = declared(model.session(), kDecoderHidden, true);
  if (!decoder_hidden)
    fail(decoder_file, "has no hidden_states output for the MTP head (rebuild the model with a head)");
  const TensorDecl head_hidden = *declared(head_, kHidden, false);
  const int64_t decoder_width = decoder_hidden->shape.empty() ? -1 : decoder_hidden->shape.back();
  hidden_size_ = head_hidden.shape.empty() ? -1 : head_hidden.shape.back();
  if (hidden_size_ <= 0 || decoder_width != hidden_size_)
    fail(file, "the head reads hidden states " + std::to_string(hidden_size_) + " wide, the decoder writes " +
                   std::to_string(decoder_width) + " (a head built for another model?)");
  if (head_hidden.dtype != decoder_hidden->dtype)
    fail(file, "the head reads " + element_type_name(head_hidden.dtype) + " hidden states, the decoder writes " +
                   element_type_name(decoder_hidden->dtype));
  hidden_dtype_ = head_hidden.dtype;
  hidden_row_bytes_ = size_t(hidden_size_) * float_element_size(hidden_dtype_);

  const TensorDecl key = *declared(head_, kPastKey, false);
  if (key.shape.size() != 4 || key.shape[1] <= 0 || key.shape[3] <= 0)
    fail(file, "past_key_values.0.key must be [batch, kv_heads, past, head_dim]");
  kv_heads_ = key.shape[1];
  head_dim_ = key.shape[3];
  kv_dtype_ = key.dtype;
}

Ort::Value MtpDrafter::kv_view(std::vector<std::byte>& bytes) {
  // One entry per slot; max_length + 1 like the decoder's cache, so a row at
  // its maximum length still has the entry its chained guesses write.
  const std::vector<int64_t> shape = {1, kv_heads_, max_length_ + 1, head_dim_};
  const size_t size = size_t(kv_heads_ * (max_length_ + 1) * head_dim_) * float_element_size(kv_dtype_);
  if (bytes.size() != size) bytes.assign(size, std::byte{0});
  return Ort::Value::CreateTensor(cpu_, bytes.data(), bytes.size(), shape.data(), shape.size(), kv_dtype_);
}

void MtpDrafter::reset_row(int64_t row) {
  Row& r = rows_.at(size_t(row));
  r.start = -1;
  r.slots = 0;
  r.pending.clear();
}

void MtpDrafter::move_row(int64_t from, int64_t to) {
  if (from == to) return;
  std::swap(rows_.at(size_t(from)), rows_.at(size_t(to)));
  reset_row(from);
}

void MtpDrafter::observe(int64_t row, int64_t position, const std::byte* hidden, int64_t rows) {
  Row& r = rows_.at(size_t(row));
  int64_t kept_pending = pending_rows(r);  // the pending rows kept: those before `position`
  if (r.start < 0 || position < r.start || position > r.start + r.slots + kept_pending) {
    // Nothing kept connects to this run: the cache starts over from it.
    r.start = position;
    r.slots = 0;
    kept_pending = 0;
  } else if (position < r.start + r.slots) {  // rolled back into the head's cache
    r.slots = position - r.start;
    kept_pending = 0;
  } else {
    kept_pending = position - (r.start + r.slots);
  }
  r.pending.resize(size_t(kept_pending) * hidden_row_bytes_);
  r.pending.insert(r.pending.end(), hidden, hidden + size_t(rows) * hidden_row_bytes_);
}

int64_t MtpDrafter::run_head(Row& r, std::span<const int64_t> ids, const std::byte* hidden, int64_t position,
                             int64_t past) {
  const int64_t s = int64_t(ids.size());
  ids_.assign(ids.begin(), ids.end());
  mask_.assign(size_t(past + s), 1);
  positions_.resize(size_t(s));
  for (int64_t i = 0; i < s; ++i) positions_[size_t(i)] = position + i;
  hidden_in_.assign(hidden, hidden + size_t(s) * hidden_row_bytes_);

  const std::vector<int64_t> ids_shape = {1, s}, mask_shape = {1, past + s}, hidden_shape = {1, s, hidden_size_};
  Ort::IoBinding binding(head_);
  binding.BindInput(kInputIds, Ort::Value::CreateTensor<int64_t>(cpu_, ids_.data(), ids_.size(), ids_shape.data(), 2));
  binding.BindInput(kHidden, Ort::Value::CreateTensor(cpu_, hidden_in_.data(), hidden_in_.size(), hidden_shape.data(),
                                                      3, hidden_dtype_));
  binding.BindInput(kMask, Ort::Value::CreateTensor<int64_t>(cpu_, mask_.data(), mask_.size(), mask_shape.data(), 2));
  binding.BindInput(kPositions,
                    Ort::Value::CreateTensor<int64_t>(cpu_, positions_.data(), positions_.size(), ids_shape.data(), 2));
  // The cache is past input and present output at once (the decoder's
  // shared-buffer mode): new entries land at index `past`, nothing moves.
  Ort::Value key = kv_view(r.key), value = kv_view(r.value);
  binding.BindInput(kPastKey, key);
  binding.BindInput(kPastValue, value);
  binding.BindOutput(kPresentKey, key);
  binding.BindOutput(kPresentValue, value);
  binding.BindOutput(kLogits, cpu_);
  binding.BindOutput(kHiddenOut, cpu_);
  try {
    head_.Run(Ort::RunOptions{nullptr}, binding);
  } catch (const Ort::Exception& e) {
    fail("mtp head run", ort_error_line(e));
  }
  const std::vector<std::string> names = binding.GetOutputNames();
  std::vector<Ort::Value> values = binding.GetOutputValues();
  const Ort::Value* logits = nullptr;
  const Ort::Value* hidden_out = nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == kLogits) logits = &values[i];
    if (names[i] == kHiddenOut) hidden_out = &values[i];
  }
  const std::vector<int64_t> logits_shape = tensor_shape(*logits);
  const size_t vocab = size_t(logits_shape.back());
  const size_t logits_rows = logits->GetTensorTypeAndShapeInfo().GetElementCount() / vocab;
  const auto* out = static_cast<const std::byte*>(hidden_out->GetTensorRawData());
  last_hidden_.assign(out + size_t(s - 1) * hidden_row_bytes_, out + size_t(s) * hidden_row_bytes_);
  return argmax(*logits, (logits_rows - 1) * vocab, vocab);
}

std::vector<int64_t> MtpDrafter::draft(int64_t row, std::span<const int64_t> context, int64_t k) {
  Row& r = rows_.at(size_t(row));
  const int64_t n = int64_t(context.size()) - 1;  // positions run; context[n] is the chosen token
  const int64_t pending = pending_rows(r);
  if (k < 1 || pending == 0 || r.start + r.slots + pending != n) return {};

  // 1. The new slots, a bounded number per run; the last one guesses t_{n+1}.
  int64_t guess = -1;
  for (int64_t done = 0; done < pending;) {
    const int64_t count = std::min(kMaxSlotsPerRun, pending - done);
    const int64_t position = r.start + r.slots;  // slot p reads token p + 1
    guess = run_head(r, context.subspan(size_t(position + 1), size_t(count)),
                     r.pending.data() + size_t(done) * hidden_row_bytes_, position, r.slots);
    r.slots += count;
    done += count;
  }
  r.pending.clear();

  // 2. Chained guesses on the head's own hidden state, one position on each;
  //    their cache entries (from index r.slots) are provisional. (run_head
  //    copies its hidden input before it overwrites last_hidden_.)
  std::vector<int64_t> guesses = {guess};
  for (int64_t j = 1; j < k; ++j) {
    const int64_t token = guesses.back();
    guesses.push_back(
        run_head(r, std::span<const int64_t>(&token, 1), last_hidden_.data(), n + j - 1, r.slots + j - 1));
  }
  return guesses;
}

}  // namespace deltagen
