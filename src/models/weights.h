// Graph weights computed from checkpoint tensors. Each returns a lazy
// Initializer: the checkpoint is read (and the tensor converted) only when
// the model is written, one tensor at a time. `ckpt` must outlive the write.
#pragma once
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "graph/graph_builder.h"

namespace deltagen {

// The tensor unchanged, as fp32.
graph::Initializer weight_as_is(const Checkpoint& ckpt, const std::string& tensor, const std::string& name);
// A Linear weight [out, in] transposed to the [in, out] that MatMul multiplies by.
graph::Initializer weight_transposed(const Checkpoint& ckpt, const std::string& tensor, const std::string& name);
// 1 + w: Qwen3.5's offset RMSNorm weight, folded so a plain RMSNorm op applies it.
graph::Initializer weight_plus_one(const Checkpoint& ckpt, const std::string& tensor, const std::string& name);
// -exp(w) in fp32: the Gated DeltaNet decay rate from A_log.
graph::Initializer weight_neg_exp(const Checkpoint& ckpt, const std::string& tensor, const std::string& name);

// Out-of-place transpose of a row-major [rows, cols] matrix (blocked for cache reuse).
std::vector<float> transpose_2d(const std::vector<float>& src, int64_t rows, int64_t cols);

}  // namespace deltagen
