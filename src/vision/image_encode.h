// Small PNG, JPEG and PPM writers, so that tests and fuzz seeds can make
// image files in code instead of committing binaries. They cover the inputs
// image_decode.h must handle: gray, gray+alpha, RGB, RGBA, palette, 16 bits,
// interlacing, gray/RGB/CMYK JPEG. Throws Error on bad arguments.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "vision/image_decode.h"

namespace deltagen {

struct PngSpec {
  int64_t width = 0, height = 0;
  int channels = 3;      // 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA; ignored with a palette
  int bit_depth = 8;     // 8 or 16 (1, 2, 4 or 8 with a palette or for gray)
  bool interlaced = false;
  std::vector<std::array<uint8_t, 3>> palette;  // non-empty: samples are palette indices
  std::vector<uint8_t> palette_alpha;           // tRNS entries for the palette
};

// samples: height * width * channels values (one per pixel with a palette),
// row-major, each below 2^bit_depth.
std::vector<uint8_t> encode_png(const PngSpec& spec, std::span<const uint16_t> samples);

// components 1 (gray), 3 (RGB) or 4 (CMYK: the samples are stored as given,
// with an Adobe marker; readers following Photoshop, PIL among them, take them
// as inverted, 255 = no ink); samples height * width * components.
std::vector<uint8_t> encode_jpeg(int64_t width, int64_t height, int components, std::span<const uint8_t> samples,
                                 int quality = 90, bool progressive = false);

// Binary PPM (P6, maxval 255).
std::vector<uint8_t> encode_ppm(const Image& image);

}  // namespace deltagen
