// Image placeholders and Qwen3.5's 3-D (M-RoPE) position ids: what the
// processor and the text model do with a prompt that holds images, before
// and around the vision tower. Shared by the float64 reference and the
// runtime, so it depends on nothing but the standard library and Error.
//
// The rules follow transformers' Qwen3-VL processor (`replace_image_token`)
// and `get_rope_index`; shared/golden/vision/README.md sections 2.3-2.4 spell
// them out.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace deltagen {

// One image's patch grid (HF's image_grid_thw): t frames of temporal_patch_size
// (1 for a still image), h x w patches of patch_size pixels.
struct ImageGrid {
  int64_t t = 1, h = 0, w = 0;
};

// The <|image_pad|> tokens (= merged patches = image feature rows) an image
// takes: t * h * w / merge^2. Throws Error when h or w is not a positive
// multiple of merge or t < 1.
int64_t image_token_count(const ImageGrid& grid, int64_t merge);

// The processor's placeholder expansion: the k-th `image_token_id` in `ids`
// (the k-th image of the prompt) becomes tokens_per_image[k] copies of
// itself; every other id is kept. Throws Error("<origin>: ...") when the
// number of image tokens in `ids` differs from tokens_per_image.size().
std::vector<int64_t> expand_image_pads(const std::vector<int64_t>& ids, int64_t image_token_id,
                                       const std::vector<int64_t>& tokens_per_image, const std::string& origin);

// Which position stream rotary frequency j of the text model turns by, in
// Qwen3.5's interleaved M-RoPE (mrope_section [sT, sH, sW]): 1 (H) when
// j % 3 == 1 and j < 3 sH, 2 (W) when j % 3 == 2 and j < 3 sW, else 0 (T).
// The float64 reference and the graph builder both read it from here.
inline int mrope_stream(int64_t j, int64_t section_h, int64_t section_w) {
  if (j % 3 == 1 && j < 3 * section_h) return 1;
  if (j % 3 == 2 && j < 3 * section_w) return 2;
  return 0;
}

// The (T, H, W) rotary positions of a run of tokens, one of each per token.
struct MropePositions {
  std::vector<int64_t> t, h, w;
  // max(position) + 1 - start - size(): the shift this run adds between a
  // token's index in the sequence and its rotary position. For a whole
  // prompt (start 0) it is HF's rope_deltas; a cached decode step at sequence
  // index s then uses position s + delta in all three streams.
  int64_t rope_delta = 0;
  // Where the positions of the token after the run begin: HF's running
  // counter `cur` (start when empty). It is max(position) + 1 unless the run
  // ends in an image with more frames than max(h, w) / merge.
  int64_t next = 0;

  int64_t size() const { return int64_t(t.size()); }
};

// The positions of `expanded_ids` (after expand_image_pads), as HF's
// get_rope_index computes them, starting at `start` instead of 0:
//   - text tokens (vision_start and vision_end included) get cur, cur+1, ...
//     in all three streams;
//   - the k-th run of image tokens belongs to image k (grids[k]) and must be
//     exactly image_token_count(grids[k]) long: its tokens, in raster order
//     over (frame ti, merged row r, merged column c), get T = cur + ti,
//     H = cur + r, W = cur + c; then cur += max(h, w) / merge.
// Throws Error on a run of image tokens of the wrong length or when the runs
// and the grids differ in number. Two images must be separated by at least
// one text token (the processor always puts vision_end / vision_start
// between them).
//
// Continuing a sequence (a later prefill chunk, or the next chat turn with an
// image after a cached prefix): pass start = the previous call's `next`,
// which is cached_len + the sequence's rope_delta so far when the prefix ends
// in text (a chat turn always does). The positions are then exactly the ones
// one call on the whole sequence gives: HF recomputes the whole sequence each
// turn, the old tokens' positions do not depend on what follows them, and
// the new tokens start at the counter the old ones left. The sequence's
// rope_delta becomes the old one plus this call's rope_delta. A chunk must
// hold each image's run whole.
MropePositions mrope_positions(const std::vector<int64_t>& expanded_ids, int64_t image_token_id,
                               const std::vector<ImageGrid>& grids, int64_t merge, int64_t start = 0);

}  // namespace deltagen
