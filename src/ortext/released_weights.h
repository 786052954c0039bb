// Giving a weight's original bytes back once a kernel has packed its own copy.
//
// ONNX Runtime maps each external initializer from model.onnx.data (a private
// file mapping per tensor); packing reads every page of it, and those pages
// stay resident for the session's life although nothing reads them again,
// so a session would hold the model twice (packed + original: measured 2.0x
// the file on the 0.8B int4 model). When the load-time rewrite has marked a
// node's weights as read by that node only (rewrite/deltagen_domain.h
// kReleaseWeightsAttribute), its kernel calls release_mapped_weight() after
// packing: the whole pages of the range are dropped (MADV_DONTNEED); a later
// read, should there be one, faults them in again from the file. Memory not
// inside a file mapping (an initializer stored inline in model.onnx, copied
// to the heap) is left alone: dropping anonymous pages would zero them.
#pragma once
#include <cstddef>

namespace deltagen::ortext {

// Returns the bytes of whole pages dropped (0 when the range is not inside
// one file-backed mapping of this process).
size_t release_mapped_weight(const void* data, size_t bytes);

}  // namespace deltagen::ortext
