// PNG (libpng 1.6), JPEG (libjpeg-turbo) and PPM P6 to 8-bit RGB.
//
// libpng and libjpeg report errors by calling a handler that must not return.
// A C++ exception thrown through their C frames is undefined behaviour, so the
// handlers longjmp back to a setjmp in a small C-style function here. Such a
// function holds no object with a destructor between setjmp and longjmp, and
// it writes only into plain storage its caller allocated before the call: the
// codec state in a Job struct, the pixels in a vector sized from the header.
// Each format is therefore read in two calls: the header (to check the limits
// before allocating anything), then the pixels.
#include "vision/image_decode.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>  // before jpeglib.h, which uses FILE without including it
#include <cstring>
#include <fstream>

#include <jpeglib.h>
#include <jerror.h>  // JWRN_JPEG_EOF; needs jpeglib.h first
#include <png.h>

#include "deltagen/error.h"

namespace deltagen {
namespace {

void check_dimensions(int64_t width, int64_t height, const DecodeLimits& limits, const std::string& origin) {
  if (width <= 0 || height <= 0)
    fail(origin, "image has no pixels (" + std::to_string(width) + "x" + std::to_string(height) + ")");
  if (width > limits.max_side || height > limits.max_side)
    fail(origin, "image is " + std::to_string(width) + "x" + std::to_string(height) + ", a side above the limit of " +
                     std::to_string(limits.max_side));
  if (width * height > limits.max_pixels)
    fail(origin, "image is " + std::to_string(width) + "x" + std::to_string(height) + ", more than " +
                     std::to_string(limits.max_pixels) + " pixels");
}

// ---- PNG -----------------------------------------------------------------------

struct PngJob {
  std::jmp_buf jump;
  char message[200];
  char warning[200];  // the first warning: libpng explains some errors in one
  const uint8_t* data;
  size_t size, at;
  uint32_t max_side;
  png_uint_32 width, height;
};

void png_on_error(png_structp png, png_const_charp message) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  std::snprintf(job->message, sizeof job->message, "%s", message);
  std::longjmp(job->jump, 1);
}

// Kept, not printed (libpng's default prints to stderr): a refused IHDR, for
// one, is a warning naming the reason followed by a bare "Invalid IHDR data".
void png_on_warning(png_structp png, png_const_charp message) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  if (!job->warning[0]) std::snprintf(job->warning, sizeof job->warning, "%s", message);
}

void png_read_memory(png_structp png, png_bytep out, size_t count) {
  auto* job = static_cast<PngJob*>(png_get_io_ptr(png));
  if (count > job->size - job->at) png_error(png, "truncated data");
  std::memcpy(out, job->data + job->at, count);
  job->at += count;
}

// Reads the chunks before the image data; with `rows` also the pixels, as
// 8-bit RGB, into the rows (width * 3 bytes each) the caller allocated from
// the header read before. Returns false with job->message set on an error.
// No C++ object with a destructor lives in this frame (see the top).
bool png_run(PngJob* job, png_bytep* rows) {
  job->at = 0;
  job->warning[0] = 0;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, png_on_error, png_on_warning);
  if (!png) {
    std::snprintf(job->message, sizeof job->message, "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(job->message, sizeof job->message, "out of memory");
    return false;
  }
  if (setjmp(job->jump)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_set_read_fn(png, job, png_read_memory);
  // libpng refuses larger sides in IHDR itself; ancillary chunks (text,
  // ICC profiles) are capped so that they cannot allocate much either.
  png_set_user_limits(png, job->max_side, job->max_side);
  png_set_chunk_malloc_max(png, 8u << 20);
  png_read_info(png, info);
  job->width = png_get_image_width(png, info);
  job->height = png_get_image_height(png, info);
  if (rows) {
    // What PIL's convert("RGB") gives: palette and low bit depths expanded,
    // 16-bit samples cut to their high byte, alpha (and tRNS) dropped, gray
    // copied to R, G and B. No gamma or color-profile correction (PIL applies
    // none either).
    png_set_expand(png);
    png_set_strip_16(png);
    png_set_strip_alpha(png);
    png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != size_t(job->width) * 3 || png_get_bit_depth(png, info) != 8)
      png_error(png, "unexpected pixel layout after conversion to RGB");
    png_read_image(png, rows);
    // The chunks after the image data are not read: a file whose pixels are
    // complete but whose end is missing still decodes, as in PIL.
  }
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

uint32_t big_endian32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

Image decode_png(std::span<const uint8_t> bytes, const std::string& origin, const DecodeLimits& limits) {
  // IHDR must be the first chunk: its size is checked here, before libpng
  // reads (and buffers) the chunks up to the image data.
  if (bytes.size() >= 24 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0)
    check_dimensions(big_endian32(&bytes[16]), big_endian32(&bytes[20]), limits, origin);
  PngJob job{};
  job.data = bytes.data();
  job.size = bytes.size();
  job.max_side = uint32_t(std::min<int64_t>(limits.max_side, 0x7fffffff));
  auto problem = [&job] {
    std::string text = std::string("PNG: ") + job.message;
    if (job.warning[0] && std::strcmp(job.warning, job.message) != 0) text += std::string(" (") + job.warning + ")";
    return text;
  };
  if (!png_run(&job, nullptr)) fail(origin, problem());
  Image image{int64_t(job.width), int64_t(job.height), {}};
  check_dimensions(image.width, image.height, limits, origin);
  image.rgb.resize(size_t(image.width * image.height * 3));
  std::vector<png_bytep> rows(size_t(image.height));
  for (int64_t y = 0; y < image.height; ++y) rows[size_t(y)] = image.rgb.data() + y * image.width * 3;
  if (!png_run(&job, rows.data())) fail(origin, problem());
  return image;
}

// ---- JPEG ----------------------------------------------------------------------

struct JpegJob {
  jpeg_error_mgr err;  // first, so that cinfo->err points at the job
  std::jmp_buf jump;
  jpeg_decompress_struct cinfo;  // here, not a local: it changes after setjmp
  char message[JMSG_LENGTH_MAX + 32];
  jpeg_progress_mgr progress;
  const uint8_t* data;
  size_t size;
  JDIMENSION width, height;
  int components;  // of the decoder's output: 3 (RGB) or 4 (CMYK)
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo, const char* message) {
  auto* job = reinterpret_cast<JpegJob*>(cinfo->err);
  std::snprintf(job->message, sizeof job->message, "%s", message);
  std::longjmp(job->jump, 1);
}

void jpeg_on_error(j_common_ptr cinfo) {
  char text[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, text);
  jpeg_fail(cinfo, text);
}

// libjpeg only warns about a file that ends early and pads the rest of the
// image with gray; here that is an error. Other warnings (corrupt data it
// recovered from) are ignored, as PIL ignores them.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(cinfo, "truncated data");
}

// A progressive JPEG can hold thousands of tiny scans, each a pass over the
// whole image: a few kilobytes that take minutes. 500 is far above what real
// encoders write.
void jpeg_on_progress(j_common_ptr cinfo) {
  if (cinfo->is_decompressor && reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > 500)
    jpeg_fail(cinfo, "more than 500 progressive scans");
}

// As png_run: the header only, or with `rgb` (width * height * 3 bytes) and
// `scratch` (one row of width * 4 bytes) the pixels too.
bool jpeg_run(JpegJob* job, uint8_t* rgb, uint8_t* scratch) {
  jpeg_decompress_struct& cinfo = job->cinfo;
  cinfo.err = jpeg_std_error(&job->err);
  job->err.error_exit = jpeg_on_error;
  job->err.emit_message = jpeg_on_message;
  job->progress.progress_monitor = jpeg_on_progress;
  jpeg_create_decompress(&cinfo);
  if (setjmp(job->jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  cinfo.progress = &job->progress;
  jpeg_mem_src(&cinfo, job->data, static_cast<unsigned long>(job->size));
  jpeg_read_header(&cinfo, TRUE);
  job->width = cinfo.image_width;
  job->height = cinfo.image_height;
  // Gray and YCbCr come out as RGB (gray copied to R, G, B, as PIL's
  // convert("RGB") does); CMYK and YCCK as CMYK, converted below.
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  job->components = cmyk ? 4 : 3;
  if (rgb) {
    // libjpeg's defaults (islow DCT, fancy upsampling) are PIL's too.
    jpeg_start_decompress(&cinfo);
    if (cinfo.output_width != job->width || cinfo.output_height != job->height ||
        cinfo.output_components != job->components)
      jpeg_fail(reinterpret_cast<j_common_ptr>(&cinfo), "unexpected output size");  // not without scaling
    while (cinfo.output_scanline < cinfo.output_height) {
      uint8_t* out = rgb + size_t(cinfo.output_scanline) * job->width * 3;
      JSAMPROW row = cmyk ? scratch : out;
      jpeg_read_scanlines(&cinfo, &row, 1);
      if (cmyk) {
        // PIL reads every 4-component JPEG as Adobe-inverted CMYK (its
        // "CMYK;I" raw mode), so C = 255 - stored value, then converts with
        // R = (255 - K) - (C * (255 - K)) / 255 (rounded as its MULDIV255).
        for (JDIMENSION x = 0; x < job->width; ++x) {
          const int nk = scratch[4 * x + 3];  // 255 - K
          for (int c = 0; c < 3; ++c) {
            const int tmp = (255 - scratch[4 * x + c]) * nk + 128;
            out[3 * x + c] = uint8_t(nk - (((tmp >> 8) + tmp) >> 8));
          }
        }
      }
    }
    // jpeg_finish_decompress is skipped: the pixels are complete, and what
    // follows them is not needed (PIL does not require it either).
  }
  jpeg_destroy_decompress(&cinfo);
  return true;
}

Image decode_jpeg(std::span<const uint8_t> bytes, const std::string& origin, const DecodeLimits& limits) {
  JpegJob job{};
  job.data = bytes.data();
  job.size = bytes.size();
  if (!jpeg_run(&job, nullptr, nullptr)) fail(origin, std::string("JPEG: ") + job.message);
  Image image{int64_t(job.width), int64_t(job.height), {}};
  check_dimensions(image.width, image.height, limits, origin);
  image.rgb.resize(size_t(image.width * image.height * 3));
  std::vector<uint8_t> scratch(size_t(image.width) * 4);
  if (!jpeg_run(&job, image.rgb.data(), scratch.data())) fail(origin, std::string("JPEG: ") + job.message);
  return image;
}

// ---- PPM (binary P6, maxval 255) ------------------------------------------------

bool is_space(uint8_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

Image decode_ppm(std::span<const uint8_t> bytes, const std::string& origin, const DecodeLimits& limits) {
  if (bytes.size() < 3 || !is_space(bytes[2])) fail(origin, "PPM: no whitespace after P6");
  size_t at = 2;
  // Whitespace and '#' comments, then a decimal number (no sign).
  auto number = [&](const char* what) -> int64_t {
    while (at < bytes.size()) {
      if (bytes[at] == '#') {
        while (at < bytes.size() && bytes[at] != '\n') ++at;
      } else if (is_space(bytes[at])) {
        ++at;
      } else {
        break;
      }
    }
    if (at >= bytes.size() || bytes[at] < '0' || bytes[at] > '9') fail(origin, std::string("PPM: bad or missing ") + what);
    int64_t value = 0;
    while (at < bytes.size() && bytes[at] >= '0' && bytes[at] <= '9') {
      value = value * 10 + (bytes[at++] - '0');
      if (value > (int64_t(1) << 40)) fail(origin, std::string("PPM: ") + what + " is too large");
    }
    return value;
  };
  Image image;
  image.width = number("width");
  image.height = number("height");
  const int64_t maxval = number("maxval");
  if (maxval != 255) fail(origin, "PPM: maxval " + std::to_string(maxval) + " (only 255 is supported)");
  // Exactly one whitespace byte separates the header from the pixels.
  if (at >= bytes.size() || !is_space(bytes[at]))
    fail(origin, "PPM: no whitespace after the header");
  ++at;
  check_dimensions(image.width, image.height, limits, origin);
  const size_t need = size_t(image.width * image.height * 3);
  if (bytes.size() - at < need) fail(origin, "PPM: truncated data");
  image.rgb.assign(bytes.begin() + ptrdiff_t(at), bytes.begin() + ptrdiff_t(at + need));
  return image;
}

bool starts_with(std::span<const uint8_t> bytes, std::initializer_list<uint8_t> magic) {
  return bytes.size() >= magic.size() && std::equal(magic.begin(), magic.end(), bytes.begin());
}

}  // namespace

Image decode_image_bytes(std::span<const uint8_t> bytes, const std::string& origin, const DecodeLimits& limits) {
  if (bytes.empty()) fail(origin, "empty image data");
  if (starts_with(bytes, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'})) return decode_png(bytes, origin, limits);
  if (starts_with(bytes, {0xff, 0xd8, 0xff})) return decode_jpeg(bytes, origin, limits);
  if (starts_with(bytes, {'P', '6'})) return decode_ppm(bytes, origin, limits);
  fail(origin, "not a PNG, JPEG or PPM image");
}

Image decode_image(const std::filesystem::path& path, const DecodeLimits& limits) {
  const std::string origin = path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(origin, "no such file");
  // The largest file a valid image within the limits needs: an uncompressed
  // PNG or PPM is about 3 bytes a pixel. A larger file is not read at all.
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > uint64_t(limits.max_pixels) * 4 + (1u << 20))
    fail(origin, "file of " + std::to_string(size) + " bytes is too large for an image within the limits");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(origin, "cannot open the file");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(origin, "read error");
  return decode_image_bytes(bytes, origin, limits);
}

}  // namespace deltagen
