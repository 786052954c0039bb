// The hybrid-state layout of a model shaped like the golden tiny-a
// checkpoint, as describe_model_io() would report it, without loading a
// model: 3 linear-attention layers (conv [B,128,3], recurrent [B,4,16,16]),
// then one full-attention layer (key/value [B,2,past,16]); vocabulary 512.
// Shared by the snapshot fuzzer and the seed generator.
#pragma once
#include <string>
#include <vector>

#include "runtime/session.h"

namespace deltagen::fuzz {

constexpr int64_t kTinyVocab = 512;

inline CacheSpec tiny_cache(int64_t layer, CacheKind kind, std::vector<int64_t> shape) {
  CacheSpec s;
  s.layer = layer;
  s.kind = kind;
  s.input_name = "past_key_values." + std::to_string(layer) + "." + cache_kind_suffix(kind);
  s.output_name = "present." + std::to_string(layer) + "." + cache_kind_suffix(kind);
  s.shape = std::move(shape);
  return s;
}

inline const ModelIo& tiny_io() {
  static const ModelIo io = [] {
    ModelIo m;
    m.has_attention_mask = m.has_position_ids = true;
    m.logits_vocab = kTinyVocab;
    for (int64_t layer = 0; layer < 3; ++layer) {
      m.caches.push_back(tiny_cache(layer, CacheKind::ConvState, {-1, 128, 3}));
      m.caches.push_back(tiny_cache(layer, CacheKind::RecurrentState, {-1, 4, 16, 16}));
    }
    m.caches.push_back(tiny_cache(3, CacheKind::Key, {-1, 2, -1, 16}));
    m.caches.push_back(tiny_cache(3, CacheKind::Value, {-1, 2, -1, 16}));
    return m;
  }();
  return io;
}

}  // namespace deltagen::fuzz
