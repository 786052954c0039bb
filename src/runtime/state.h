// The hybrid state of a batch of sequences, allocated once and updated in place:
//   - a KV cache (key, value) for every full-attention layer,
//     [B, kv_heads, capacity, head_dim] with capacity = max_length + 1;
//   - a conv state [B, conv_dim, K-1] and a recurrent state [B, v_heads, d_k, d_v]
//     for every linear-attention layer;
//   - per row, the tokens already run (their count is the row's length and
//     the next position).
//
// Every buffer is bound as both the graph's past_key_values.* input and its
// present.* output (GroupQueryAttention's past_present_share_buffer mode:
// new keys/values are written at seqlens_k, nothing else moves; the linear
// states are overwritten in place, which ORT 1.30's CPU kernels support
// bit-exactly). A row is also a contiguous slice of every buffer, so one row
// can run alone through batch-1 views of the same memory.
//
// On another execution provider than the CPU (Model::ep()) the buffers have a
// device twin, and the graph runs on the twins: a decode step copies nothing
// through the host. The host buffers stay what everything else reads and
// writes (snapshots, row copies, parking, reset); the two sides are synced
// lazily, whole buffers at a time: to the device before a run if the host
// was written (before_run), to the host before the host is read or written
// after a run. A device buffer cannot be sliced by row (a WebGPU buffer is a
// handle, not an address), so there the batch runs whole: batch 1.
//
// The spare KV slot (index max_length) is where a parked row writes: in a
// batched decode step a finished row still has to be fed something, so it is
// fed a dummy token whose key/value land beyond its valid length and whose
// effect on the linear states is undone on unpark().
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <onnxruntime_cxx_api.h>

#include "runtime/session.h"

namespace deltagen {

class HybridState {
 public:
  static constexpr int64_t kMaxBatch = 1024;

  // Throws Error when the batch or the state's size is out of reach. With a
  // `model` on a non-CPU provider the state gets its device twin (batch 1 only).
  HybridState(const ModelIo& io, int64_t batch, int64_t max_length, Model* model = nullptr);

  bool on_device() const { return !device_.empty(); }
  // Around every Session::Run with this state bound (no-ops on the CPU).
  void before_run();
  void after_run() { host_stale_ = on_device(); }

  int64_t batch() const { return batch_; }
  int64_t max_length() const { return max_length_; }
  const ModelIo& io() const { return io_; }

  // The tokens row `row` has run, oldest first; length(row) == tokens(row).size().
  const std::vector<int64_t>& tokens(int64_t row) const { return rows_[size_t(row)].tokens; }
  int64_t length(int64_t row) const { return int64_t(tokens(row).size()); }
  int64_t past_length() const { return length(0); }  // batch-1 shorthand

  void reset();                // every row back to the empty zero state
  void reset_row(int64_t row);

  // Binds every buffer as past input and present output: all rows, one row,
  // or the first `count` rows (a batch-`count` view of the same memory, for a
  // decode step over only the sequences that are running).
  void bind_all(Ort::IoBinding& binding) const;
  void bind_row(Ort::IoBinding& binding, int64_t row) const;
  void bind_first_rows(Ort::IoBinding& binding, int64_t count);

  // Row `to` becomes a copy of row `from` (its valid KV entries, linear
  // states and tokens); neither stays parked.
  void copy_row(int64_t from, int64_t to);

  // Records that `row` ran `ids` (after the graph has written their state).
  void append(int64_t row, std::span<const int64_t> ids);

  // Parking (batched decode of rows that already stopped): park() saves the
  // row's linear states; unpark() puts them back. A parked row's tokens and
  // valid KV entries are never touched.
  void park(int64_t row);
  void unpark(int64_t row);
  bool parked(int64_t row) const { return rows_[size_t(row)].parked; }

  // Rolling a row back (speculative decoding, runtime/generation.cpp): the
  // linear-attention states cannot be undone, so they are saved before a run
  // and put back after it; the KV cache needs nothing but a shorter length
  // (truncate: the entries past it are no longer read, and are overwritten).
  void save_linear(int64_t row, std::vector<std::byte>& into) const;
  void restore_linear(int64_t row, std::span<const std::byte> from);
  void truncate(int64_t row, int64_t length);

  // The bytes of one cache buffer that belong to `row` (a contiguous slice).
  // cache = index into io().caches.
  std::span<std::byte> row_bytes(size_t cache, int64_t row);
  std::span<const std::byte> row_bytes(size_t cache, int64_t row) const;
  // Shape of one row of a cache buffer: [1, ...] (KV: [1, kv_heads, capacity, head_dim]).
  std::vector<int64_t> row_shape(size_t cache) const;
  int64_t kv_capacity() const { return max_length_ + 1; }

  // Restores a row's token history (the buffers are written by the caller).
  void set_tokens(int64_t row, std::span<const int64_t> ids);

  // The whole-batch buffer of one layer's state (for tests and inspection).
  const Ort::Value& tensor(int64_t layer, CacheKind kind) const;

 private:
  struct Row {
    std::vector<int64_t> tokens;  // reserved to max_length: appending never allocates
    bool parked = false;
    std::vector<std::byte> parked_linear_state;  // the conv + recurrent slices, while parked
  };

  void check_row(int64_t row) const;
  void sync_to_host() const;
  size_t row_byte_count(size_t cache) const;

  const ModelIo& io_;
  int64_t batch_;
  int64_t max_length_;
  std::vector<std::shared_ptr<uint8_t>> memory_;    // zeroed, owned here, viewed by buffers_
  std::vector<Ort::Value> buffers_;                 // parallel to io_.caches, whole batch
  std::vector<std::vector<Ort::Value>> row_views_;  // [row][cache]: batch-1 views into buffers_
  std::vector<std::vector<Ort::Value>> first_rows_views_;  // [count-1][cache], made on first use
  std::vector<Row> rows_;
  // The device twin (empty on the CPU) and who is newer.
  std::unique_ptr<Ort::Allocator> device_allocator_;
  std::vector<Ort::Value> device_;
  mutable bool host_stale_ = false;   // the device ran since the host was synced
  mutable bool device_stale_ = true;  // the host was written since the device was synced
};

}  // namespace deltagen
