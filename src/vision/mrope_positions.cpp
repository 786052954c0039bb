#include "vision/mrope_positions.h"

#include <algorithm>

#include "deltagen/error.h"

namespace deltagen {
namespace {

std::string grid_text(const ImageGrid& g) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "literal" + string.
  std::string s(1, '(');
  s += std::to_string(g.t);
  s += ", ";
  s += std::to_string(g.h);
  s += ", ";
  s += std::to_string(g.w);
  s += ')';
  return s;
}

}  // namespace

int64_t image_token_count(const ImageGrid& g, int64_t merge) {
  if (merge < 1) fail("image grid", "spatial merge size " + std::to_string(merge) + " is not positive");
  if (g.t < 1 || g.h < merge || g.w < merge || g.h % merge != 0 || g.w % merge != 0)
    fail("image grid " + grid_text(g),
         "needs t >= 1 and h, w positive multiples of the merge size " + std::to_string(merge));
  return g.t * (g.h / merge) * (g.w / merge);
}

std::vector<int64_t> expand_image_pads(const std::vector<int64_t>& ids, int64_t image_token_id,
                                       const std::vector<int64_t>& tokens_per_image, const std::string& origin) {
  const int64_t pads = std::count(ids.begin(), ids.end(), image_token_id);
  if (pads != int64_t(tokens_per_image.size()))
    fail(origin, "the prompt has " + std::to_string(pads) + " image placeholders for " +
                     std::to_string(tokens_per_image.size()) + " images");
  std::vector<int64_t> out;
  size_t image = 0;
  for (int64_t id : ids) {
    if (id != image_token_id) {
      out.push_back(id);
      continue;
    }
    const int64_t n = tokens_per_image[image++];
    if (n < 1) fail(origin, "image " + std::to_string(image - 1) + " has " + std::to_string(n) + " tokens");
    out.insert(out.end(), size_t(n), image_token_id);
  }
  return out;
}

MropePositions mrope_positions(const std::vector<int64_t>& ids, int64_t image_token_id,
                               const std::vector<ImageGrid>& grids, int64_t merge, int64_t start) {
  const int64_t L = int64_t(ids.size());
  MropePositions p;
  p.t.reserve(ids.size());
  p.h.reserve(ids.size());
  p.w.reserve(ids.size());
  int64_t cur = start;
  size_t image = 0;
  for (int64_t i = 0; i < L;) {
    if (ids[size_t(i)] != image_token_id) {  // a text token: the same position in all three streams
      p.t.push_back(cur);
      p.h.push_back(cur);
      p.w.push_back(cur);
      ++cur;
      ++i;
      continue;
    }
    // A run of image tokens: the next image, whole.
    int64_t run = 0;
    while (i + run < L && ids[size_t(i + run)] == image_token_id) ++run;
    if (image >= grids.size())
      fail("image positions", "run " + std::to_string(image) + " of image tokens (at index " + std::to_string(i) +
                                  ") has no image grid (" + std::to_string(grids.size()) + " given)");
    const ImageGrid& g = grids[image];
    const int64_t expected = image_token_count(g, merge);
    if (run != expected)
      fail("image positions", "image " + std::to_string(image) + " (grid " + grid_text(g) + ") needs a run of " +
                                  std::to_string(expected) + " image tokens, the ids have " + std::to_string(run) +
                                  " at index " + std::to_string(i));
    const int64_t lh = g.h / merge, lw = g.w / merge;
    for (int64_t ti = 0; ti < g.t; ++ti)
      for (int64_t r = 0; r < lh; ++r)
        for (int64_t c = 0; c < lw; ++c) {
          p.t.push_back(cur + ti);
          p.h.push_back(cur + r);
          p.w.push_back(cur + c);
        }
    cur += std::max(lh, lw);
    i += run;
    ++image;
  }
  if (image != grids.size())
    fail("image positions", "the ids have " + std::to_string(image) + " runs of image tokens for " +
                                std::to_string(grids.size()) + " images");
  p.next = cur;
  if (L > 0) {
    int64_t top = start;
    for (int64_t i = 0; i < L; ++i) top = std::max({top, p.t[size_t(i)], p.h[size_t(i)], p.w[size_t(i)]});
    p.rope_delta = top + 1 - start - L;
  }
  return p;
}

}  // namespace deltagen
