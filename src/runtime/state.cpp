#include "runtime/state.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "kernels/stream_memory.h"
#include "runtime/execution_provider.h"
#include "runtime/tensor.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

// The shape of a buffer for `batch` rows; KV caches get `capacity` slots.
std::vector<int64_t> buffer_shape(const CacheSpec& spec, int64_t batch, int64_t capacity) {
  std::vector<int64_t> shape = spec.shape;
  shape[0] = batch;
  if (is_kv(spec.kind)) shape[2] = capacity;
  return shape;
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Bytes of every buffer together, or nullopt when the count overflows.
std::optional<uint64_t> state_bytes(const ModelIo& io, int64_t batch, int64_t capacity) {
  uint64_t total = 0;
  for (const auto& spec : io.caches) {
    uint64_t n = float_element_size(spec.dtype);
    for (int64_t d : buffer_shape(spec, batch, capacity))
      if (__builtin_mul_overflow(n, uint64_t(d), &n)) return std::nullopt;
    if (__builtin_add_overflow(total, n, &total)) return std::nullopt;
  }
  return total;
}

std::string gib_text(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", double(bytes) / double(1ull << 30));
  return text;
}

}  // namespace

HybridState::HybridState(const ModelIo& io, int64_t batch, int64_t max_length, Model* model)
    : io_(io), batch_(batch), max_length_(max_length) {
  if (batch < 1) fail("runtime", "batch size must be at least 1");
  if (batch > kMaxBatch)
    fail("runtime", "batch size " + std::to_string(batch) + " is more than " + std::to_string(kMaxBatch));
  if (max_length < 1) fail("runtime", "the maximum length must be at least 1 token");
  for (const auto& spec : io_.caches)
    if (spec.shape[0] > 0 && spec.shape[0] != batch)
      fail("model input " + spec.input_name, "has a fixed batch of " + std::to_string(spec.shape[0]));

  const std::optional<uint64_t> bytes = state_bytes(io, batch, kv_capacity());
  const std::string sizes = "batch " + std::to_string(batch) + " x maximum length " + std::to_string(max_length);
  if (!bytes) fail("runtime", "the state of " + sizes + " is too large to address");
  // Every decode step reads and writes the states and reads the KV cache:
  // huge pages, like the packed weights (kernels/stream_memory.h).
  const Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  try {
    for (const auto& spec : io_.caches) {
      const std::vector<int64_t> shape = buffer_shape(spec, batch, kv_capacity());
      const size_t n = size_t(element_count(shape)) * float_element_size(spec.dtype);
      memory_.push_back(kernels::allocate_stream_memory(n, kernels::PageSize::Huge));
      buffers_.push_back(Ort::Value::CreateTensor(cpu, memory_.back().get(), n, shape.data(), shape.size(), spec.dtype));
    }
  } catch (const std::bad_alloc&) {
    fail("runtime", "cannot allocate the state of " + sizes + " (" + gib_text(*bytes) + ")");
  } catch (const Ort::Exception&) {
    fail("runtime", "cannot allocate the state of " + sizes + " (" + gib_text(*bytes) + ")");
  }
  row_views_.resize(size_t(batch));
  for (int64_t row = 0; row < batch; ++row) {
    for (size_t c = 0; c < io_.caches.size(); ++c) {
      const std::vector<int64_t> shape = row_shape(c);
      std::span<std::byte> bytes = row_bytes(c, row);
      row_views_[size_t(row)].push_back(Ort::Value::CreateTensor(cpu, bytes.data(), bytes.size(), shape.data(),
                                                                 shape.size(), io_.caches[c].dtype));
    }
  }
  rows_.resize(size_t(batch));
  for (Row& r : rows_) r.tokens.reserve(size_t(max_length));

  const auto device = model ? device_memory_info(model->ep()) : nullptr;
  if (!device) return;
  const std::string ep = std::string("execution provider ") + execution_provider_name(model->ep());
  if (batch != 1) fail(ep, "runs one sequence at a time (batch 1; " + std::to_string(batch) + " asked)");
  try {
    device_allocator_ = std::make_unique<Ort::Allocator>(model->session(), *device);
    for (size_t c = 0; c < io_.caches.size(); ++c) {
      const std::vector<int64_t> shape = buffer_shape(io_.caches[c], batch, kv_capacity());
      device_.push_back(Ort::Value::CreateTensor(*device_allocator_, shape.data(), shape.size(), io_.caches[c].dtype));
    }
    device_stale_ = true;  // the twins start as garbage; the zeroed host goes up before the first run
  } catch (const Ort::Exception& e) {
    fail(ep, "cannot allocate the state of " + sizes + " (" + gib_text(*bytes) + ") on the device: " + ort_error_line(e));
  }
}

// Whole buffers, both ways: the state is small next to the weights a run
// reads, and it moves only when the host touches it between runs.
void HybridState::sync_to_host() const {
  if (!host_stale_) return;
  Ort::Status status = ort_env().CopyTensors(device_, buffers_, nullptr);
  if (!status.IsOK()) fail("runtime", "cannot copy the state from the device: " + status.GetErrorMessage());
  host_stale_ = false;
}

void HybridState::before_run() {
  if (!on_device() || !device_stale_) return;
  sync_to_host();  // the host holds the newest bytes of every buffer before they go up
  Ort::Status status = ort_env().CopyTensors(buffers_, device_, nullptr);
  if (!status.IsOK()) fail("runtime", "cannot copy the state to the device: " + status.GetErrorMessage());
  device_stale_ = false;
}

void HybridState::check_row(int64_t row) const {
  if (row < 0 || row >= batch_) fail("runtime", "row " + std::to_string(row) + " is outside the batch");
}

size_t HybridState::row_byte_count(size_t cache) const {
  const CacheSpec& spec = io_.caches[cache];
  return size_t(element_count(row_shape(cache))) * float_element_size(spec.dtype);
}

std::vector<int64_t> HybridState::row_shape(size_t cache) const {
  return buffer_shape(io_.caches[cache], 1, kv_capacity());
}

std::span<std::byte> HybridState::row_bytes(size_t cache, int64_t row) {
  check_row(row);
  sync_to_host();
  device_stale_ = on_device();
  const size_t n = row_byte_count(cache);
  auto* base = static_cast<std::byte*>(buffers_[cache].GetTensorMutableRawData());
  return {base + size_t(row) * n, n};
}

std::span<const std::byte> HybridState::row_bytes(size_t cache, int64_t row) const {
  check_row(row);
  sync_to_host();
  const size_t n = row_byte_count(cache);
  const auto* base = static_cast<const std::byte*>(buffers_[cache].GetTensorRawData());
  return {base + size_t(row) * n, n};
}

void HybridState::reset() {
  for (int64_t row = 0; row < batch_; ++row) reset_row(row);
}

// A fresh sequence starts from zero linear states. Its KV slices need no
// clearing: only the first length(row) entries of a row are ever read, and
// zeroing a long cache on every reset or restore would cost more than the run.
void HybridState::reset_row(int64_t row) {
  check_row(row);
  for (size_t c = 0; c < io_.caches.size(); ++c) {
    if (is_kv(io_.caches[c].kind)) continue;
    std::span<std::byte> bytes = row_bytes(c, row);
    std::memset(bytes.data(), 0, bytes.size());
  }
  Row& r = rows_[size_t(row)];
  r.tokens.clear();
  r.parked = false;
}

void HybridState::bind_all(Ort::IoBinding& binding) const {
  const std::vector<Ort::Value>& bound = on_device() ? device_ : buffers_;
  for (size_t c = 0; c < io_.caches.size(); ++c) {
    binding.BindInput(io_.caches[c].input_name.c_str(), bound[c]);
    binding.BindOutput(io_.caches[c].output_name.c_str(), bound[c]);
  }
}

void HybridState::bind_row(Ort::IoBinding& binding, int64_t row) const {
  check_row(row);
  for (size_t c = 0; c < io_.caches.size(); ++c) {
    const Ort::Value& view = row_views_[size_t(row)][c];
    binding.BindInput(io_.caches[c].input_name.c_str(), view);
    binding.BindOutput(io_.caches[c].output_name.c_str(), view);
  }
}

void HybridState::bind_first_rows(Ort::IoBinding& binding, int64_t count) {
  if (count < 1 || count > batch_) fail("runtime", "cannot bind " + std::to_string(count) + " rows of a batch of " + std::to_string(batch_));
  if (count == batch_) return bind_all(binding);
  first_rows_views_.resize(size_t(batch_));
  std::vector<Ort::Value>& views = first_rows_views_[size_t(count - 1)];
  if (views.empty()) {
    const Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
    for (size_t c = 0; c < io_.caches.size(); ++c) {
      std::vector<int64_t> shape = row_shape(c);
      shape[0] = count;
      std::span<std::byte> first = row_bytes(c, 0);
      views.push_back(Ort::Value::CreateTensor(cpu, first.data(), first.size() * size_t(count), shape.data(),
                                               shape.size(), io_.caches[c].dtype));
    }
  }
  for (size_t c = 0; c < io_.caches.size(); ++c) {
    binding.BindInput(io_.caches[c].input_name.c_str(), views[c]);
    binding.BindOutput(io_.caches[c].output_name.c_str(), views[c]);
  }
}

void HybridState::copy_row(int64_t from, int64_t to) {
  check_row(from);
  check_row(to);
  if (from == to) return;
  unpark(from);
  const int64_t length = this->length(from);
  for (size_t c = 0; c < io_.caches.size(); ++c) {
    std::span<const std::byte> src = row_bytes(c, from);
    std::span<std::byte> dst = row_bytes(c, to);
    if (!is_kv(io_.caches[c].kind)) {
      std::memcpy(dst.data(), src.data(), src.size());
      continue;
    }
    // [1, heads, capacity, head_dim]: per head, only the first `length` positions are valid.
    const std::vector<int64_t> shape = row_shape(c);
    const size_t position_bytes = size_t(shape[3]) * float_element_size(io_.caches[c].dtype);
    const size_t head_stride = size_t(shape[2]) * position_bytes, used = size_t(length) * position_bytes;
    for (int64_t h = 0; h < shape[1] && used > 0; ++h)
      std::memcpy(dst.data() + size_t(h) * head_stride, src.data() + size_t(h) * head_stride, used);
  }
  Row& r = rows_[size_t(to)];
  r.tokens = rows_[size_t(from)].tokens;
  r.parked = false;
}

void HybridState::append(int64_t row, std::span<const int64_t> ids) {
  check_row(row);
  Row& r = rows_[size_t(row)];
  if (r.tokens.size() + ids.size() > size_t(max_length_))
    fail("runtime", "row " + std::to_string(row) + " would exceed the maximum length " + std::to_string(max_length_));
  r.tokens.insert(r.tokens.end(), ids.begin(), ids.end());
}

void HybridState::set_tokens(int64_t row, std::span<const int64_t> ids) {
  check_row(row);
  if (ids.size() > size_t(max_length_))
    fail("runtime", std::to_string(ids.size()) + " tokens exceed the maximum length " + std::to_string(max_length_));
  Row& r = rows_[size_t(row)];
  r.tokens.assign(ids.begin(), ids.end());
  r.parked = false;
}

void HybridState::save_linear(int64_t row, std::vector<std::byte>& into) const {
  check_row(row);
  into.clear();
  for (size_t c = 0; c < io_.caches.size(); ++c) {
    if (is_kv(io_.caches[c].kind)) continue;
    std::span<const std::byte> bytes = row_bytes(c, row);
    into.insert(into.end(), bytes.begin(), bytes.end());
  }
}

void HybridState::restore_linear(int64_t row, std::span<const std::byte> from) {
  check_row(row);
  size_t offset = 0;
  for (size_t c = 0; c < io_.caches.size(); ++c) {
    if (is_kv(io_.caches[c].kind)) continue;
    std::span<std::byte> bytes = row_bytes(c, row);
    if (offset + bytes.size() > from.size()) fail("runtime", "restore_linear: the saved state is too short");
    std::memcpy(bytes.data(), from.data() + offset, bytes.size());
    offset += bytes.size();
  }
}

void HybridState::truncate(int64_t row, int64_t length) {
  check_row(row);
  Row& r = rows_[size_t(row)];
  if (length < 0 || length > int64_t(r.tokens.size()))
    fail("runtime", "truncate: row " + std::to_string(row) + " has " + std::to_string(r.tokens.size()) +
                        " tokens, not " + std::to_string(length));
  r.tokens.resize(size_t(length));  // the KV entries past it are beyond the valid length: overwritten later
}

void HybridState::park(int64_t row) {
  check_row(row);
  Row& r = rows_[size_t(row)];
  if (r.parked) return;
  save_linear(row, r.parked_linear_state);
  r.parked = true;
}

void HybridState::unpark(int64_t row) {
  check_row(row);
  Row& r = rows_[size_t(row)];
  if (!r.parked) return;
  restore_linear(row, r.parked_linear_state);
  r.parked = false;
}

const Ort::Value& HybridState::tensor(int64_t layer, CacheKind kind) const {
  for (size_t c = 0; c < buffers_.size(); ++c)
    if (io_.caches[c].layer == layer && io_.caches[c].kind == kind) {
      sync_to_host();
      return buffers_[c];
    }
  fail("runtime", std::string("layer ") + std::to_string(layer) + " has no " + cache_kind_suffix(kind) + " state");
}

}  // namespace deltagen
