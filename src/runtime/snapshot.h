// A copy of one sequence's whole state, detached from any Generator: the
// token history, the position, the KV cache up to the current length and the
// conv / recurrent states. It can be restored into any row of any Generator
// of the same model, in memory or through a file.
//
// File format (version 1, or 2 for a state that holds images; little-endian,
// written atomically; both versions load):
//   char[8]  magic "DGSTATE\0"
//   u32      version (1 or 2)
//   u32      reserved (0)
//   u64      vocab_size of the model
//   u64      length: tokens in the state (= the next position)
//   u64      token_count: length + pending tokens (chosen but not yet run)
//   u32      cache_count, then per cache:
//              u32 layer, u32 kind (0 key, 1 value, 2 conv, 3 recurrent),
//              u32 ONNX element type, u32 rank, i64 dims[rank], u64 byte_count
//              (dims are one row's: [1, ...]; a KV cache's length dim = length)
//   version 2 only (written when rope_delta != 0 or images is not empty):
//   i64      rope_delta
//   u32      image_count, then per image: i64 start, i64 tokens,
//              u32 hash_size (<= 256), char hash[hash_size]
//   i64      tokens[token_count]
//   bytes    every cache's data, in order
//   u64      FNV-1a 64 checksum of every byte before it
// Loading checks everything: magic, version, sizes, checksum, then on restore
// that every cache matches the model's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <onnxruntime_cxx_api.h>

#include "runtime/state.h"

namespace deltagen {

struct CacheSnapshot {
  int64_t layer = 0;
  CacheKind kind = CacheKind::Key;
  ONNXTensorElementDataType dtype = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  std::vector<int64_t> dims;     // one row's shape; KV: [1, kv_heads, length, head_dim]
  std::vector<std::byte> data;   // dense in dims order
};

// An image whose pad tokens the snapshot's tokens hold: tokens [start,
// start + tokens) are its features, `pixel_hash` says which image it was
// (PixelValues::pixel_hash). The prompt cache keys on it (runtime/prefix_cache.h).
struct SnapshotImage {
  int64_t start = 0, tokens = 0;
  std::string pixel_hash;
  bool operator==(const SnapshotImage&) const = default;
};

struct StateSnapshot {
  int64_t vocab_size = 0;
  int64_t length = 0;            // tokens[0, length) are in the state
  std::vector<int64_t> tokens;   // the conversation: run tokens, then pending ones
  std::vector<CacheSnapshot> caches;  // parallel to the model's io.caches
  // A --vision model's M-RoPE shift of the tokens after an image prompt
  // (Generator::rope_delta of the row when captured; 0 for text), and the
  // images among the tokens, in order. capture_row leaves both to the caller
  // (they live in the Generator, not the state); restore_row ignores them.
  // Captured inside an image prompt (the server's checkpoints), rope_delta is
  // the row's delta before that prompt: whoever restores it attaches the rest
  // of the prompt's positions (serve/scheduler.cpp does).
  int64_t rope_delta = 0;
  std::vector<SnapshotImage> images;

  std::span<const int64_t> pending() const { return std::span(tokens).subspan(size_t(length)); }
};

// Copies row `row` of `state`; `pending` = tokens chosen but not yet run.
StateSnapshot capture_row(const HybridState& state, int64_t row, int64_t vocab_size, std::span<const int64_t> pending);

// Writes `snapshot` into row `row` (replacing what it held). Throws Error
// (subject `origin`) when the snapshot was taken from a model with other
// dimensions or does not fit the state's maximum length; the row is left
// untouched then.
void restore_row(HybridState& state, int64_t row, int64_t vocab_size, const StateSnapshot& snapshot,
                 const std::string& origin = "snapshot");

std::vector<std::byte> serialize_snapshot(const StateSnapshot& snapshot);
StateSnapshot parse_snapshot(std::span<const std::byte> bytes, const std::string& origin);

void save_snapshot_file(const StateSnapshot& snapshot, const std::filesystem::path& file);
StateSnapshot load_snapshot_file(const std::filesystem::path& file);

}  // namespace deltagen
