// From the public KernelOptions (deltagen/options.h) to what a session is
// made with: the environment's overrides applied once, the values checked,
// and the kernels' switches as ONNX Runtime session config entries (the
// names in ortext/deltagen_ops.h, which is where they are read).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "deltagen/options.h"

namespace deltagen {

// ONNX Runtime session config entries (key, value), in the order they are added.
using SessionConfig = std::vector<std::pair<std::string, std::string>>;

// `options` with DELTAGEN_KERNELS=ort (set = Ort) and DELTAGEN_KERNEL_ISA
// (a cap on max_isa) applied. Throws Error("kernels.max_isa: ...") etc. for
// a value the kernels would reject.
KernelOptions resolved_kernel_options(KernelOptions options);

// The deltagen.matmul.* entries for the switches that differ from the
// kernels' defaults (none for KernelSet::Ort).
SessionConfig kernel_session_config(const KernelOptions& options);

}  // namespace deltagen
