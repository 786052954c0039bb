// Fuzzes image input for the vision tower (src/vision): format detection, the
// PNG/JPEG/PPM decoders with their limits and setjmp error paths, then the
// whole preprocessing (smart_resize, bicubic resize, patches) on what decoded.
// The limits are lowered so that one input stays a few milliseconds and well
// under libFuzzer's memory limit.
#include <cmath>

#include "fuzz_util.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"

using namespace deltagen;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const DecodeLimits limits{4096, 1 << 20};
  Image image;
  const bool decoded = fuzz::expect_only_error("decode_image_bytes", [&] {
    image = decode_image_bytes({data, size}, "fuzz input", limits);
  });
  if (!decoded) return 0;
  if (image.width <= 0 || image.height <= 0 || image.width > limits.max_side || image.height > limits.max_side ||
      image.width * image.height > limits.max_pixels)
    fuzz::finding("decoded an image outside the limits");
  if (image.rgb.size() != size_t(image.width * image.height * 3)) fuzz::finding("RGB size differs from width x height x 3");

  PreprocessorConfig config;
  config.min_pixels = 1024;
  config.max_pixels = 65536;
  fuzz::expect_only_error("preprocess_image", [&] {
    const PixelValues pv = preprocess_image(image, config);
    if (pv.rows != pv.grid_thw[0] * pv.grid_thw[1] * pv.grid_thw[2]) fuzz::finding("rows differ from the grid");
    if (pv.data.size() != size_t(pv.rows * pv.cols)) fuzz::finding("pixel_values size differs from rows x cols");
    if (pv.rows * config.patch_size * config.patch_size > 2 * config.max_pixels)
      fuzz::finding("more pixels than max_pixels allows");
    for (float v : pv.data)
      if (!(v >= -1.0f && v <= 1.0f)) fuzz::finding("pixel value outside [-1, 1]");
  });
  return 0;
}
