// The hybrid state carried from one run of the graph to the next:
//   - a KV cache (key, value) for every full-attention layer, growing by the
//     number of tokens each run: [B, kv_heads, past, head_dim];
//   - a conv state [B, conv_dim, K-1] and a recurrent state [B, v_heads, d_k, d_v]
//     for every linear-attention layer, fixed in size;
//   - the number of tokens already processed (the next position).
// Everything starts at zero (KV caches empty). After a run, the graph's
// present.* outputs become the next run's past_key_values.* inputs: the
// OrtValues are moved, never copied.
#pragma once
#include <cstdint>
#include <vector>

#include <onnxruntime_cxx_api.h>

#include "runtime/session.h"

namespace deltagen {

class HybridState {
 public:
  HybridState(const ModelIo& io, int64_t batch);

  int64_t batch() const { return batch_; }
  int64_t past_length() const { return past_length_; }  // tokens processed so far

  void reset();  // back to the initial zero state

  // Binds every past tensor as an input and asks ORT to allocate every present
  // output on the CPU, in the order of io.caches.
  void bind(Ort::IoBinding& binding, const Ort::MemoryInfo& cpu) const;
  // Takes the present tensors (in bind order) as the state after `new_tokens` more tokens.
  void advance(std::vector<Ort::Value>::iterator presents, int64_t new_tokens);

  // The current past tensor of one layer (for tests and inspection).
  const Ort::Value& tensor(int64_t layer, CacheKind kind) const;

 private:
  void check_present(const CacheSpec& spec, const Ort::Value& present, int64_t total) const;

  const ModelIo& io_;
  int64_t batch_;
  int64_t past_length_ = 0;
  std::vector<Ort::Value> values_;  // parallel to io_.caches
};

}  // namespace deltagen
