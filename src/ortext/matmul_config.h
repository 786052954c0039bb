// The deltagen.matmul.* session config entries (deltagen_ops.h), read by every
// op that runs kernels::matmul_nbits (deltagen.MatMulNBits, deltagen.QMoE).
#pragma once
#include <onnxruntime_cxx_api.h>

#include "kernels/matmul_nbits.h"
#include "kernels/packed_weights.h"

namespace deltagen::ortext {

// Lowers or sets `config` and `pack` from the session's entries; throws Error
// naming the entry for a value the kernels do not take.
void read_matmul_config(const Ort::ConstKernelInfo& info, kernels::MatMulConfig& config, kernels::PackOptions& pack);

}  // namespace deltagen::ortext
