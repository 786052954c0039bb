// Image files for the vision tower: PNG, JPEG and binary PPM (P6) decoded to
// 8-bit RGB, the input image_preprocess.h expects. The format comes from the
// magic bytes, never from a file name or a MIME type a client sent.
//
// What PIL's `Image.convert("RGB")` would give is the target (the Hugging Face
// processor runs it on every image): gray is replicated to three channels, a
// palette is looked up, alpha is dropped (not composited), 16-bit samples keep
// their high byte. EXIF orientation is ignored: the HF processor does not
// apply it to an image it is handed either.
//
// Every problem (unknown format, truncated or corrupt data, a size over the
// limits) throws deltagen::Error("<origin>: <problem>"). The limits are
// checked on the header, before the pixels are allocated.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace deltagen {

struct Image {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // HWC: height rows of width pixels of R, G, B
};

// Bounds on what a file may make the decoder allocate. The defaults allow a
// 16384 x 16384 photo (768 MiB of RGB); the fuzz target lowers them.
struct DecodeLimits {
  int64_t max_side = 32768;
  int64_t max_pixels = int64_t(1) << 28;
};

// `origin` names the source in error messages: a path, or the place in a
// request ("messages[0].content[1].image_url").
Image decode_image_bytes(std::span<const uint8_t> bytes, const std::string& origin,
                         const DecodeLimits& limits = {});
// Reads the whole file, then decode_image_bytes with the path as origin.
Image decode_image(const std::filesystem::path& path, const DecodeLimits& limits = {});

}  // namespace deltagen
