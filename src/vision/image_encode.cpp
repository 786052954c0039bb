// See image_encode.h. The same setjmp discipline as image_decode.cpp: the
// libpng/libjpeg error handlers longjmp to a frame that owns no C++ object
// with a destructor; the output is collected in plain malloc'd storage.
#include "vision/image_encode.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h
#include <cstdlib>
#include <cstring>
#include <string>

#include <jpeglib.h>
#include <png.h>

#include "deltagen/error.h"

namespace deltagen {
namespace {

// ---- PNG -----------------------------------------------------------------------

struct PngOut {
  std::jmp_buf jump;
  char message[200];
  uint8_t* bytes;  // malloc'd
  size_t size, capacity;
};

void png_out_error(png_structp png, png_const_charp message) {
  auto* out = static_cast<PngOut*>(png_get_error_ptr(png));
  std::snprintf(out->message, sizeof out->message, "%s", message);
  std::longjmp(out->jump, 1);
}

void png_out_warning(png_structp, png_const_charp) {}

void png_out_write(png_structp png, png_bytep data, size_t count) {
  auto* out = static_cast<PngOut*>(png_get_io_ptr(png));
  if (out->size + count > out->capacity) {
    const size_t capacity = std::max(out->capacity * 2, out->size + count);
    auto* grown = static_cast<uint8_t*>(std::realloc(out->bytes, capacity));
    if (!grown) png_error(png, "out of memory");
    out->bytes = grown;
    out->capacity = capacity;
  }
  std::memcpy(out->bytes + out->size, data, count);
  out->size += count;
}

void png_out_flush(png_structp) {}

// rows: packed rows in PNG's own layout (big-endian 16-bit samples, low
// bit depths packed MSB first), made by the caller.
bool png_encode(PngOut* out, const PngSpec* spec, int color_type, png_bytep* rows) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, out, png_out_error, png_out_warning);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    return false;
  }
  if (setjmp(out->jump)) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, out, png_out_write, png_out_flush);
  png_set_IHDR(png, info, png_uint_32(spec->width), png_uint_32(spec->height), spec->bit_depth, color_type,
               spec->interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_color palette[256];
  if (!spec->palette.empty()) {
    for (size_t i = 0; i < spec->palette.size() && i < 256; ++i)
      palette[i] = {spec->palette[i][0], spec->palette[i][1], spec->palette[i][2]};
    png_set_PLTE(png, info, palette, int(std::min<size_t>(spec->palette.size(), 256)));
    if (!spec->palette_alpha.empty())
      png_set_tRNS(png, info, spec->palette_alpha.data(), int(std::min<size_t>(spec->palette_alpha.size(), 256)),
                   nullptr);
  }
  png_write_info(png, info);
  if (spec->interlaced) png_set_interlace_handling(png);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

// ---- JPEG ----------------------------------------------------------------------

struct JpegOut {
  jpeg_error_mgr err;  // first: cinfo.err points here
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  jpeg_compress_struct cinfo;
  unsigned char* bytes;  // from jpeg_mem_dest (malloc'd)
  unsigned long size;
};

void jpeg_out_error(j_common_ptr cinfo) {
  auto* out = reinterpret_cast<JpegOut*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, out->message);
  std::longjmp(out->jump, 1);
}

bool jpeg_encode(JpegOut* out, int64_t width, int64_t height, int components, const uint8_t* samples, int quality,
                 bool progressive) {
  jpeg_compress_struct& cinfo = out->cinfo;
  cinfo.err = jpeg_std_error(&out->err);
  out->err.error_exit = jpeg_out_error;
  jpeg_create_compress(&cinfo);
  if (setjmp(out->jump)) {
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_mem_dest(&cinfo, &out->bytes, &out->size);
  cinfo.image_width = JDIMENSION(width);
  cinfo.image_height = JDIMENSION(height);
  cinfo.input_components = components;
  cinfo.in_color_space = components == 1 ? JCS_GRAYSCALE : components == 3 ? JCS_RGB : JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(samples + size_t(cinfo.next_scanline) * size_t(width) * size_t(components));
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

}  // namespace

std::vector<uint8_t> encode_png(const PngSpec& spec, std::span<const uint16_t> samples) {
  const bool indexed = !spec.palette.empty();
  const int channels = indexed ? 1 : spec.channels;
  const int depth = spec.bit_depth;
  if (spec.width <= 0 || spec.height <= 0 || spec.width > 65535 || spec.height > 65535)
    fail("encode_png", "bad size");
  if (channels < 1 || channels > 4) fail("encode_png", "channels must be 1 to 4");
  const bool low_depth_ok = indexed || channels == 1;
  if (!(depth == 8 || (depth == 16 && !indexed) || (low_depth_ok && (depth == 1 || depth == 2 || depth == 4))))
    fail("encode_png", "bit depth " + std::to_string(depth) + " not allowed here");
  if (samples.size() != size_t(spec.width * spec.height * channels)) fail("encode_png", "wrong number of samples");
  const int color_type = indexed          ? PNG_COLOR_TYPE_PALETTE
                         : channels == 1 ? PNG_COLOR_TYPE_GRAY
                         : channels == 2 ? PNG_COLOR_TYPE_GRAY_ALPHA
                         : channels == 3 ? PNG_COLOR_TYPE_RGB
                                         : PNG_COLOR_TYPE_RGBA;
  // Pack each row as PNG stores it.
  const size_t row_bytes = (size_t(spec.width) * channels * depth + 7) / 8;
  std::vector<uint8_t> packed(row_bytes * size_t(spec.height), 0);
  std::vector<png_bytep> rows(size_t(spec.height));
  for (int64_t y = 0; y < spec.height; ++y) {
    uint8_t* row = packed.data() + size_t(y) * row_bytes;
    rows[size_t(y)] = row;
    for (int64_t i = 0; i < spec.width * channels; ++i) {
      const uint16_t v = samples[size_t(y * spec.width * channels + i)];
      if (v >> depth) fail("encode_png", "sample " + std::to_string(v) + " does not fit " + std::to_string(depth) + " bits");
      if (depth == 16) {
        row[2 * i] = uint8_t(v >> 8);
        row[2 * i + 1] = uint8_t(v);
      } else if (depth == 8) {
        row[i] = uint8_t(v);
      } else {
        const int64_t bit = i * depth;
        row[bit / 8] |= uint8_t(v << (8 - depth - bit % 8));
      }
    }
  }
  PngOut out{};
  const bool ok = png_encode(&out, &spec, color_type, rows.data());
  std::vector<uint8_t> bytes(out.bytes, out.bytes + (ok ? out.size : 0));
  std::free(out.bytes);
  if (!ok) fail("encode_png", out.message);
  return bytes;
}

std::vector<uint8_t> encode_jpeg(int64_t width, int64_t height, int components, std::span<const uint8_t> samples,
                                 int quality, bool progressive) {
  if (width <= 0 || height <= 0 || width > 65500 || height > 65500) fail("encode_jpeg", "bad size");
  if (components != 1 && components != 3 && components != 4) fail("encode_jpeg", "components must be 1, 3 or 4");
  if (samples.size() != size_t(width * height * components)) fail("encode_jpeg", "wrong number of samples");
  JpegOut out{};
  const bool ok = jpeg_encode(&out, width, height, components, samples.data(), quality, progressive);
  std::vector<uint8_t> bytes(out.bytes, out.bytes + (ok ? out.size : 0));
  std::free(out.bytes);
  if (!ok) fail("encode_jpeg", out.message);
  return bytes;
}

std::vector<uint8_t> encode_ppm(const Image& image) {
  const std::string header = "P6\n" + std::to_string(image.width) + " " + std::to_string(image.height) + "\n255\n";
  std::vector<uint8_t> bytes(header.begin(), header.end());
  bytes.insert(bytes.end(), image.rgb.begin(), image.rgb.end());
  return bytes;
}

}  // namespace deltagen
