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
#include <filesystem>

namespace deltagen::ortext {

// Returns the bytes of whole pages dropped (0 when the range is not inside
// one file-backed mapping of this process).
size_t release_mapped_weight(const void* data, size_t bytes);

// After a session has loaded: drops the resident pages of every mapping of
// `data_file` that holds no page this process wrote (Private_Dirty 0), i.e.
// every page would read back exactly as it was, and advises them
// MADV_RANDOM (no read-ahead around a row a Gather reads). Whatever a kernel
// reads afterwards (a row of the embedding, a weight ORT's own kernel
// multiplies) faults back in from the page cache; the kernel may map a whole
// large folio (up to 2 MB) per fault, so a Gather's table still becomes
// resident over a long generation. Returns the bytes dropped.
size_t release_clean_file_pages(const std::filesystem::path& data_file);

}  // namespace deltagen::ortext
