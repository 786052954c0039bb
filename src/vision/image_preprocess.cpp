// See image_preprocess.h. The resize is the slow (PIL) processor's; the
// rescale/normalize arithmetic is the fast processor's, which the golden
// pixel_values reproduce exactly (see preprocess_image).
#include "vision/image_preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "deltagen/error.h"
#include "util/sha256.h"

namespace deltagen {

namespace {

using nlohmann::json;

// ---- preprocessor_config.json ----------------------------------------------------

struct ConfigReader {
  std::string file;

  [[noreturn]] void bad(const std::string& key, const std::string& problem) const { fail(file, key + ": " + problem); }

  int64_t integer(const json& value, const std::string& key, int64_t lo, int64_t hi) const {
    if (!value.is_number_integer()) bad(key, "not an integer");
    // nlohmann keeps a non-negative integer as unsigned, a negative one as signed.
    if (value.is_number_unsigned() ? value.get<uint64_t>() > uint64_t(hi) : value.get<int64_t>() > hi)
      bad(key, "above " + std::to_string(hi));
    const int64_t v = value.is_number_unsigned() ? int64_t(value.get<uint64_t>()) : value.get<int64_t>();
    if (v < lo) bad(key, "below " + std::to_string(lo));
    return v;
  }
  double number(const json& value, const std::string& key) const {
    if (!value.is_number()) bad(key, "not a number");
    const double v = value.get<double>();
    if (!std::isfinite(v)) bad(key, "not finite");
    return v;
  }
  bool boolean(const json& value, const std::string& key) const {
    if (!value.is_boolean()) bad(key, "not true or false");
    return value.get<bool>();
  }
  // HF accepts one number for all channels or a list of three.
  std::array<double, 3> per_channel(const json& value, const std::string& key) const {
    if (value.is_number()) {
      const double v = number(value, key);
      return {v, v, v};
    }
    if (!value.is_array() || value.size() != 3) bad(key, "not a number or a list of 3 numbers");
    return {number(value[0], key + "[0]"), number(value[1], key + "[1]"), number(value[2], key + "[2]")};
  }
};

// Python's round() on a double: to nearest, ties to even.
double round_half_even(double x) {
  const double lower = std::floor(x);
  const double diff = x - lower;
  if (diff > 0.5) return lower + 1;
  if (diff < 0.5) return lower;
  return std::fmod(lower, 2.0) == 0 ? lower : lower + 1;
}

// ---- PIL's bicubic resample (Resample.c facts, own code) ---------------------------

constexpr int kPrecisionBits = 32 - 8 - 2;  // PIL's: 8-bit result, 2 bits of headroom

double cubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// The taps of one output line: for output index i, source indices
// first[i] .. first[i] + count[i] - 1 with fixed-point weights w[i * ksize + j].
struct Taps {
  int64_t ksize = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weight;
};

Taps bicubic_taps(int64_t in_size, int64_t out_size) {
  // PIL keeps the box in float and the scale in double.
  const double scale = double(float(in_size) - 0.0f) / double(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = 2.0 * filter_scale;  // the cubic's support, widened when shrinking
  Taps taps;
  taps.ksize = int64_t(std::ceil(support)) * 2 + 1;
  taps.first.resize(size_t(out_size));
  taps.count.resize(size_t(out_size));
  taps.weight.assign(size_t(out_size * taps.ksize), 0);
  std::vector<double> k(size_t(taps.ksize));
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = (double(i) + 0.5) * scale;
    const double inv_scale = 1.0 / filter_scale;  // PIL multiplies by the inverse, not divides
    // C's (int) cast truncates toward zero; both bounds are then clamped.
    int64_t lo = int64_t(center - support + 0.5);
    int64_t hi = int64_t(center + support + 0.5);
    lo = std::max<int64_t>(lo, 0);
    hi = std::min(hi, in_size);
    const int64_t n = std::max<int64_t>(hi - lo, 0);
    double total = 0;
    for (int64_t j = 0; j < n; ++j) {
      k[size_t(j)] = cubic((double(j + lo) - center + 0.5) * inv_scale);
      total += k[size_t(j)];
    }
    for (int64_t j = 0; j < n; ++j) {
      const double w = total != 0.0 ? k[size_t(j)] / total : k[size_t(j)];
      // Rounded half away from zero, as PIL's normalize_coeffs_8bpc.
      const double fixed = w * double(1 << kPrecisionBits);
      taps.weight[size_t(i * taps.ksize + j)] = int32_t(w < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
    taps.first[size_t(i)] = lo;
    taps.count[size_t(i)] = n;
  }
  return taps;
}

uint8_t clip8(int64_t sum) {
  const int64_t v = sum >> kPrecisionBits;  // arithmetic shift: floor, as PIL
  return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v);
}

// One pass along width (horizontal) or height, uint8 in and out.
Image resample_width(const Image& in, int64_t out_width) {
  const Taps taps = bicubic_taps(in.width, out_width);
  Image out{out_width, in.height, std::vector<uint8_t>(size_t(out_width * in.height * 3))};
  for (int64_t y = 0; y < in.height; ++y) {
    const uint8_t* src = in.rgb.data() + y * in.width * 3;
    uint8_t* dst = out.rgb.data() + y * out_width * 3;
    for (int64_t x = 0; x < out_width; ++x) {
      const int32_t* w = taps.weight.data() + x * taps.ksize;
      for (int c = 0; c < 3; ++c) {
        int64_t sum = int64_t(1) << (kPrecisionBits - 1);
        for (int64_t j = 0; j < taps.count[size_t(x)]; ++j) sum += int64_t(src[(taps.first[size_t(x)] + j) * 3 + c]) * w[j];
        dst[x * 3 + c] = clip8(sum);
      }
    }
  }
  return out;
}

Image resample_height(const Image& in, int64_t out_height) {
  const Taps taps = bicubic_taps(in.height, out_height);
  const int64_t row = in.width * 3;
  Image out{in.width, out_height, std::vector<uint8_t>(size_t(row * out_height))};
  for (int64_t y = 0; y < out_height; ++y) {
    const int32_t* w = taps.weight.data() + y * taps.ksize;
    const uint8_t* src = in.rgb.data() + taps.first[size_t(y)] * row;
    uint8_t* dst = out.rgb.data() + y * row;
    for (int64_t i = 0; i < row; ++i) {
      int64_t sum = int64_t(1) << (kPrecisionBits - 1);
      for (int64_t j = 0; j < taps.count[size_t(y)]; ++j) sum += int64_t(src[j * row + i]) * w[j];
      dst[i] = clip8(sum);
    }
  }
  return out;
}

void check_image(const Image& image) {
  if (image.width <= 0 || image.height <= 0 || image.rgb.size() != size_t(image.width * image.height * 3))
    fail("image", "is " + std::to_string(image.width) + "x" + std::to_string(image.height) + " with " +
                      std::to_string(image.rgb.size()) + " bytes of RGB");
}

}  // namespace

PreprocessorConfig load_preprocessor_config(const std::filesystem::path& json_file) {
  const ConfigReader r{json_file.string()};
  std::ifstream in(json_file, std::ios::binary);
  if (!in) fail(r.file, "cannot open the file");
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) fail(r.file, "not valid JSON");
  if (!j.is_object()) fail(r.file, "not a JSON object");

  PreprocessorConfig c;
  if (j.contains("patch_size")) c.patch_size = r.integer(j["patch_size"], "patch_size", 1, 1024);
  if (j.contains("temporal_patch_size"))
    c.temporal_patch_size = r.integer(j["temporal_patch_size"], "temporal_patch_size", 1, 64);
  if (j.contains("merge_size")) c.merge_size = r.integer(j["merge_size"], "merge_size", 1, 64);
  // Pixel counts up to the decoder's limit; the images they allow stay bounded.
  constexpr int64_t kMaxPixels = int64_t(1) << 28;
  if (j.contains("size") && !j["size"].is_null()) {
    const json& size = j["size"];
    if (!size.is_object() || !size.contains("shortest_edge") || !size.contains("longest_edge"))
      r.bad("size", "needs shortest_edge and longest_edge");
    c.min_pixels = r.integer(size["shortest_edge"], "size.shortest_edge", 0, kMaxPixels);
    c.max_pixels = r.integer(size["longest_edge"], "size.longest_edge", 1, kMaxPixels);
  }
  if (j.contains("min_pixels") && !j["min_pixels"].is_null())
    c.min_pixels = r.integer(j["min_pixels"], "min_pixels", 0, kMaxPixels);
  if (j.contains("max_pixels") && !j["max_pixels"].is_null())
    c.max_pixels = r.integer(j["max_pixels"], "max_pixels", 1, kMaxPixels);
  if (c.min_pixels > c.max_pixels)
    r.bad("min_pixels", std::to_string(c.min_pixels) + " is above max_pixels " + std::to_string(c.max_pixels));
  if (j.contains("image_mean")) c.mean = r.per_channel(j["image_mean"], "image_mean");
  if (j.contains("image_std")) c.std = r.per_channel(j["image_std"], "image_std");
  for (double s : c.std)
    if (s == 0) r.bad("image_std", "has a zero");
  if (j.contains("rescale_factor")) {
    c.rescale_factor = r.number(j["rescale_factor"], "rescale_factor");
    if (c.rescale_factor <= 0) r.bad("rescale_factor", "not positive");
  }
  if (j.contains("do_resize")) c.do_resize = r.boolean(j["do_resize"], "do_resize");
  if (j.contains("do_rescale")) c.do_rescale = r.boolean(j["do_rescale"], "do_rescale");
  if (j.contains("do_normalize")) c.do_normalize = r.boolean(j["do_normalize"], "do_normalize");
  // Only bicubic (PIL's 3) is implemented; another filter would silently give
  // other pixels.
  if (j.contains("resample") && r.integer(j["resample"], "resample", 0, 5) != 3)
    r.bad("resample", std::to_string(j["resample"].get<int64_t>()) + " (only 3, bicubic, is supported)");
  return c;
}

PreprocessorConfig preprocessor_config_in(const std::filesystem::path& folder) {
  const std::filesystem::path file = folder / "preprocessor_config.json";
  PreprocessorConfig pre = std::filesystem::exists(file) ? load_preprocessor_config(file) : PreprocessorConfig{};
  pre.max_pixels = std::min(pre.max_pixels, kMaxImagePixels);
  pre.min_pixels = std::min(pre.min_pixels, pre.max_pixels);
  return pre;
}

std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                                         int64_t max_pixels) {
  const std::string subject = "smart_resize(" + std::to_string(height) + "x" + std::to_string(width) + ")";
  if (height <= 0 || width <= 0 || height > (int64_t(1) << 24) || width > (int64_t(1) << 24))
    fail(subject, "image size out of range");
  if (factor <= 0 || min_pixels < 0 || max_pixels <= 0) fail(subject, "bad factor or pixel limits");
  if (double(std::max(height, width)) / double(std::min(height, width)) > 200)
    fail(subject, "aspect ratio above 200");
  const double h = double(height), w = double(width), f = double(factor);
  int64_t hb = int64_t(round_half_even(h / f)) * factor;
  int64_t wb = int64_t(round_half_even(w / f)) * factor;
  if (hb * wb > max_pixels) {
    const double beta = std::sqrt(h * w / double(max_pixels));
    hb = std::max(factor, int64_t(std::floor(h / beta / f)) * factor);
    wb = std::max(factor, int64_t(std::floor(w / beta / f)) * factor);
  } else if (hb * wb < min_pixels) {
    const double beta = std::sqrt(double(min_pixels) / (h * w));
    hb = int64_t(std::ceil(h * beta / f)) * factor;
    wb = int64_t(std::ceil(w * beta / f)) * factor;
  }
  if (hb <= 0 || wb <= 0) fail(subject, "rounds to an empty image (" + std::to_string(hb) + "x" + std::to_string(wb) + ")");
  return {hb, wb};
}

Image resize_bicubic(const Image& image, int64_t out_height, int64_t out_width) {
  check_image(image);
  if (out_height <= 0 || out_width <= 0) fail("resize", "empty target size");
  // PIL skips a pass whose size does not change (it would be the identity).
  if (out_width == image.width && out_height == image.height) return image;
  if (out_width == image.width) return resample_height(image, out_height);
  const Image wide = resample_width(image, out_width);
  return out_height == image.height ? wide : resample_height(wide, out_height);
}

int64_t PixelValues::num_image_tokens() const {
  return grid_thw[0] * grid_thw[1] * grid_thw[2] / (merge_size * merge_size);
}

PixelValues preprocess_image(const Image& image, const PreprocessorConfig& config) {
  check_image(image);
  const int64_t P = config.patch_size, T = config.temporal_patch_size, m = config.merge_size;
  if (P <= 0 || T <= 0 || m <= 0) fail("preprocess", "patch, temporal and merge sizes must be positive");
  const int64_t factor = P * m;
  int64_t hb = image.height, wb = image.width;
  if (config.do_resize) {
    std::tie(hb, wb) = smart_resize(image.height, image.width, factor, config.min_pixels, config.max_pixels);
  } else if (hb % factor || wb % factor) {
    fail("preprocess", "image is " + std::to_string(hb) + "x" + std::to_string(wb) +
                           " and do_resize is off: both sides must be multiples of " + std::to_string(factor));
  }
  if (hb * wb > (int64_t(1) << 28)) fail("preprocess", "resized image of " + std::to_string(hb) + "x" + std::to_string(wb) + " is too large");
  const Image resized = resize_bicubic(image, hb, wb);

  PixelValues pv;
  pv.merge_size = m;
  const int64_t gh = hb / P, gw = wb / P;
  pv.grid_thw = {1, gh, gw};
  pv.rows = gh * gw;
  pv.cols = 3 * T * P * P;
  pv.data.resize(size_t(pv.rows * pv.cols));

  // Rescale and normalize fused as HF's fast processor does, in float32:
  // (u8 - mean / rescale) / (std / rescale), here (u8 - 127.5) / 127.5. That is
  // the correctly rounded value of (u8 * rescale - mean) / std, and it equals
  // the golden pixel_values bit for bit. The slow processor's two steps
  // (float32(u8 * rescale), then (x - mean) / std) differ by at most one ulp
  // (5.9e-8 on the golden image).
  std::array<std::array<float, 256>, 3> lut;
  const float to_unit = float(1.0 / config.rescale_factor);
  for (int c = 0; c < 3; ++c) {
    float mean = float(config.mean[size_t(c)]), sd = float(config.std[size_t(c)]);
    if (config.do_rescale && config.do_normalize) mean *= to_unit, sd *= to_unit;
    for (int v = 0; v < 256; ++v) {
      float x = float(v);
      if (config.do_normalize)
        x = (x - mean) / sd;
      else if (config.do_rescale)
        x = x * float(config.rescale_factor);
      lut[size_t(c)][size_t(v)] = x;
    }
  }

  // Rows in merge-block-major order; each row is [c][t][py][px], the T frames
  // being copies of the one image.
  int64_t r = 0;
  for (int64_t bh = 0; bh < gh / m; ++bh)
    for (int64_t bw = 0; bw < gw / m; ++bw)
      for (int64_t ih = 0; ih < m; ++ih)
        for (int64_t iw = 0; iw < m; ++iw, ++r) {
          const int64_t y0 = (bh * m + ih) * P, x0 = (bw * m + iw) * P;
          float* out = pv.data.data() + r * pv.cols;
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t t = 0; t < T; ++t)
              for (int64_t py = 0; py < P; ++py)
                for (int64_t px = 0; px < P; ++px)
                  *out++ = lut[size_t(c)][resized.rgb[size_t(((y0 + py) * wb + x0 + px) * 3 + c)]];
        }

  char header[512];
  std::snprintf(header, sizeof header,
                "deltagen-pixels v1 h=%lld w=%lld patch=%lld t=%lld merge=%lld rescale=%d:%a normalize=%d:%a,%a,%a/%a,%a,%a\n",
                (long long)hb, (long long)wb, (long long)P, (long long)T, (long long)m, int(config.do_rescale),
                config.rescale_factor, int(config.do_normalize), config.mean[0], config.mean[1], config.mean[2],
                config.std[0], config.std[1], config.std[2]);
  Sha256 hash;
  hash.update(header);
  hash.update(std::string_view(reinterpret_cast<const char*>(resized.rgb.data()), resized.rgb.size()));
  std::string hex;
  for (uint8_t b : hash.finish()) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  pv.pixel_hash = hex;
  return pv;
}

}  // namespace deltagen
