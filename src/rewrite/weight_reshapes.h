// A Reshape of a weight stored in model.onnx.data becomes the weight itself,
// read with the new shape from the same bytes of the file.
//
// The quantized tied embedding is read by GatherBlockQuantized through a
// Reshape of the lm_head's packed table ([vocab, blocks, bytes] ->
// [vocab, K / 2]). ONNX Runtime folds that Reshape when the session loads
// into a new tensor: a heap copy of the whole table (124 MB on the 0.8B
// model, 318 MB on 4B) that stays resident although a token reads one row.
// A second initializer naming the same file range with the new dims gives the
// Gather the same bytes through ORT's own file mapping, where untouched rows
// cost no memory.
#pragma once
#include <cstdint>

#include <onnx/onnx_pb.h>

namespace deltagen::rewrite {

// Replaces each Reshape of an external initializer by a constant shape with
// an external initializer (named as the Reshape's output) over the same
// bytes; returns how many it replaced.
int64_t alias_reshaped_weights(onnx::GraphProto& graph);

}  // namespace deltagen::rewrite
