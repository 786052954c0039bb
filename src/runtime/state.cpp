#include "runtime/state.h"

#include "runtime/tensor.h"
#include "util/error.h"

namespace deltagen {
namespace {

// The shape of a state tensor before the first token: the batch filled in
// and, for KV caches, a past length of zero.
std::vector<int64_t> initial_shape(const CacheSpec& spec, int64_t batch) {
  std::vector<int64_t> shape = spec.shape;
  shape[0] = batch;
  if (spec.kind == CacheKind::Key || spec.kind == CacheKind::Value) shape[2] = 0;
  return shape;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace

HybridState::HybridState(const ModelIo& io, int64_t batch) : io_(io), batch_(batch) {
  if (batch < 1) fail("runtime", "batch size must be at least 1");
  for (const auto& spec : io_.caches)
    if (spec.shape[0] > 0 && spec.shape[0] != batch)
      fail("model input " + spec.input_name, "has a fixed batch of " + std::to_string(spec.shape[0]));
  reset();
}

void HybridState::reset() {
  values_.clear();
  for (const auto& spec : io_.caches) values_.push_back(zero_tensor(spec.dtype, initial_shape(spec, batch_)));
  past_length_ = 0;
}

void HybridState::bind(Ort::IoBinding& binding, const Ort::MemoryInfo& cpu) const {
  for (size_t i = 0; i < values_.size(); ++i) {
    binding.BindInput(io_.caches[i].input_name.c_str(), values_[i]);
    binding.BindOutput(io_.caches[i].output_name.c_str(), cpu);
  }
}

void HybridState::advance(std::vector<Ort::Value>::iterator presents, int64_t new_tokens) {
  const int64_t total = past_length_ + new_tokens;
  // Check before taking anything, so that a bad output leaves the state as it was.
  for (size_t i = 0; i < values_.size(); ++i) check_present(io_.caches[i], presents[i], total);
  for (auto& value : values_) value = std::move(*presents++);
  past_length_ = total;
}

// A KV present must hold past + new tokens (the non-shared-buffer contract);
// a linear-attention state keeps its shape.
void HybridState::check_present(const CacheSpec& spec, const Ort::Value& present, int64_t total) const {
  std::vector<int64_t> expected = initial_shape(spec, batch_);
  if (spec.kind == CacheKind::Key || spec.kind == CacheKind::Value) expected[2] = total;
  if (tensor_shape(present) != expected)
    fail("model output " + spec.output_name, "has shape " + shape_text(tensor_shape(present)) + ", expected " +
                                                 shape_text(expected));
}

const Ort::Value& HybridState::tensor(int64_t layer, CacheKind kind) const {
  for (size_t i = 0; i < values_.size(); ++i)
    if (io_.caches[i].layer == layer && io_.caches[i].kind == kind) return values_[i];
  fail("runtime", std::string("layer ") + std::to_string(layer) + " has no " + cache_kind_suffix(kind) + " state");
}

}  // namespace deltagen
