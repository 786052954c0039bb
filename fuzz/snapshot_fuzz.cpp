// Fuzzes state snapshot files (runtime/snapshot): parse_snapshot on
// arbitrary bytes, then restore_row into the hybrid state of a model shaped
// like the golden tiny-a checkpoint (3 linear-attention layers, then one
// full-attention layer; vocabulary 512).
//
// The format ends in an FNV-1a checksum that random mutations almost never
// get right, so each input is tried twice: as it is (the checksum must reject
// it unless it is right) and with its last 8 bytes replaced by the right
// checksum, which lets the fuzzer reach the header and size checks behind it.
//
// Oracle: whatever parses and restores must capture back to the same state
// (capture_row(restore_row(parse(x))) == parse(x)), without touching any
// other row.
#include <cstring>
#include <span>
#include <vector>

#include "fuzz_util.h"
#include "runtime/snapshot.h"
#include "runtime/state.h"
#include "tiny_state.h"

using namespace deltagen;

namespace {

constexpr int64_t kVocab = fuzz::kTinyVocab;
constexpr int64_t kMaxLength = 24;  // small: every restore fills the whole state
using fuzz::tiny_io;

uint64_t fnv1a64(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// Restores into row 0 of a batch of 2 whose row 1 is never written: a
// restore that strays past its row shows up as non-zero bytes in row 1 (or,
// past the buffer, as an ASan report).
void try_bytes(std::span<const std::byte> bytes) {
  static HybridState state(tiny_io(), 2, kMaxLength);
  StateSnapshot s;
  if (!fuzz::expect_only_error("parse_snapshot", [&] { s = parse_snapshot(bytes, "fuzz.dgstate"); })) return;
  if (!fuzz::expect_only_error("restore_row", [&] { restore_row(state, 0, kVocab, s, "fuzz.dgstate"); })) return;
  if (state.length(0) != s.length) fuzz::finding("restored length differs from the snapshot's");
  for (size_t c = 0; c < tiny_io().caches.size(); ++c)
    for (std::byte b : state.row_bytes(c, 1))
      if (b != std::byte{0}) fuzz::finding("restore_row wrote outside its row");
  const StateSnapshot again = capture_row(state, 0, kVocab, s.pending());
  bool same = again.vocab_size == s.vocab_size && again.length == s.length && again.tokens == s.tokens &&
              again.caches.size() == s.caches.size();
  for (size_t c = 0; same && c < s.caches.size(); ++c)
    same = again.caches[c].layer == s.caches[c].layer && again.caches[c].kind == s.caches[c].kind &&
           again.caches[c].dtype == s.caches[c].dtype && again.caches[c].dims == s.caches[c].dims &&
           again.caches[c].data == s.caches[c].data;
  if (!same) fuzz::finding("a restored snapshot does not capture back to the same state");
  // ...and its file form parses to the same state again.
  const std::vector<std::byte> file = serialize_snapshot(again);
  if (parse_snapshot(file, "again").tokens != s.tokens) fuzz::finding("serialize/parse round trip lost tokens");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try_bytes(std::as_bytes(std::span(data, size)));
  if (size >= 8) {
    std::vector<uint8_t> fixed(data, data + size);
    const uint64_t sum = fnv1a64(fixed.data(), size - 8);
    std::memcpy(fixed.data() + size - 8, &sum, 8);
    try_bytes(std::as_bytes(std::span(fixed)));
  }
  return 0;
}
