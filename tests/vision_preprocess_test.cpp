// Image input for the vision tower (src/vision): decoding PNG/JPEG/PPM,
// smart_resize, PIL's bicubic resize, and the pixel_values of the golden case
// in ../shared/golden/vision (README §2.1). Test images other than the golden
// one are made here with src/vision/image_encode.h; no binary is committed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "deltagen/error.h"
#include "util/npy.h"
#include "vision/image_decode.h"
#include "vision/image_encode.h"
#include "vision/image_preprocess.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;

// ../shared/golden/vision beside the repository; like the other golden sets,
// found next to DELTAGEN_GOLDEN (tiny-a) when that is set.
fs::path vision_golden() {
  if (const char* e = std::getenv("DELTAGEN_GOLDEN")) return fs::path(e).parent_path() / "vision";
  return fs::path(DELTAGEN_SOURCE_DIR) / ".." / "shared" / "golden" / "vision";
}

// A fresh folder, removed with the object.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "deltagen-vision-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::ofstream(path / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return path / name;
  }
};

// The message of the Error `fn` throws ("" if it throws none).
template <class Fn>
std::string thrown_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<uint8_t> text_bytes(const std::string& s) { return {s.begin(), s.end()}; }

// A smooth RGB test picture: gradients plus a soft blob.
Image gradient(int64_t width, int64_t height) {
  Image image{width, height, std::vector<uint8_t>(size_t(width * height * 3))};
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) {
      uint8_t* p = &image.rgb[size_t((y * width + x) * 3)];
      p[0] = uint8_t(255 * x / std::max<int64_t>(width - 1, 1));
      p[1] = uint8_t(255 * y / std::max<int64_t>(height - 1, 1));
      const double d = std::hypot(x - width / 2.0, y - height / 2.0) / double(width);
      p[2] = uint8_t(std::lround(255 * std::exp(-8 * d * d)));
    }
  return image;
}

Image random_image(int64_t width, int64_t height, uint32_t seed) {
  std::mt19937 rng(seed);
  Image image{width, height, std::vector<uint8_t>(size_t(width * height * 3))};
  for (auto& v : image.rgb) v = uint8_t(rng());
  return image;
}

std::vector<uint16_t> widen(const std::vector<uint8_t>& v) { return {v.begin(), v.end()}; }

// ---- the golden case -----------------------------------------------------------------

// The payload of a version-1 .npy file of dtype |u1 (util/npy reads only the
// float and int dtypes), after checking its header names `shape`.
std::vector<uint8_t> read_u1_npy(const fs::path& path, const std::string& shape) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  if (text.size() < 10 || text.compare(0, 6, "\x93NUMPY") != 0) throw Error(path.string() + ": not a .npy file");
  const size_t header_len = uint8_t(text[8]) | size_t(uint8_t(text[9])) << 8;
  const std::string header = text.substr(10, header_len);
  EXPECT_NE(header.find("'descr': '|u1'"), std::string::npos) << header;
  EXPECT_NE(header.find("'shape': " + shape), std::string::npos) << header;
  return {text.begin() + ptrdiff_t(10 + header_len), text.end()};
}

TEST(VisionGolden, DecodedPngAndPpmEqualTheGoldenImage) {
  const std::vector<uint8_t> golden = read_u1_npy(vision_golden() / "golden" / "small" / "image_uint8.npy", "(64, 96, 3)");
  ASSERT_EQ(golden.size(), 64u * 96 * 3);
  for (const char* name : {"img_64x96.png", "img_64x96.ppm"}) {
    const Image image = decode_image(vision_golden() / "images" / name);
    EXPECT_EQ(image.height, 64) << name;
    EXPECT_EQ(image.width, 96) << name;
    EXPECT_TRUE(image.rgb == golden) << name << " differs from image_uint8.npy";
  }
}

TEST(VisionGolden, PixelValuesAndGrid) {
  const fs::path dir = vision_golden();
  PreprocessorConfig config = load_preprocessor_config(dir / "tiny-vl" / "preprocessor_config.json");
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(dir / "golden" / "summary.json"));
  config.min_pixels = summary["cases"]["small"]["min_pixels"].get<int64_t>();  // 4096: no resize
  config.max_pixels = summary["cases"]["small"]["max_pixels"].get<int64_t>();
  const std::vector<float> golden = read_npy(dir / "golden" / "small" / "pixel_values.npy").as_f32();
  const std::vector<float> hf32 = read_npy(dir / "golden" / "small" / "hf32_pixel_values.npy").as_f32();
  const std::vector<int64_t> grid = read_npy(dir / "golden" / "small" / "image_grid_thw.npy").as_i64();
  ASSERT_EQ(grid.size(), 3u);
  std::string hash;
  for (const char* name : {"img_64x96.png", "img_64x96.ppm"}) {
    const PixelValues pv = preprocess_image(decode_image(dir / "images" / name), config);
    EXPECT_EQ(pv.grid_thw, (std::array<int64_t, 3>{grid[0], grid[1], grid[2]})) << name;
    EXPECT_EQ(pv.grid_thw, (std::array<int64_t, 3>{1, 4, 6})) << name;
    EXPECT_EQ(pv.num_image_tokens(), 6) << name;
    ASSERT_EQ(pv.rows, 24);
    ASSERT_EQ(pv.cols, 1536);
    ASSERT_EQ(pv.data.size(), golden.size());
    double worst = 0;
    for (size_t i = 0; i < golden.size(); ++i) worst = std::max(worst, std::fabs(double(pv.data[i]) - golden[i]));
    EXPECT_LE(worst, 1e-6) << name;
    // Measured: the fused float32 form gives both golden files bit for bit.
    EXPECT_EQ(worst, 0.0) << name;
    EXPECT_TRUE(pv.data == hf32) << name << " differs from hf32_pixel_values.npy";
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", worst);
    RecordProperty(std::string("max_abs_diff_") + name, text);
    EXPECT_EQ(pv.pixel_hash.size(), 64u);
    if (!hash.empty()) {
      EXPECT_EQ(pv.pixel_hash, hash) << "the PNG and the PPM hold the same pixels";
    }
    hash = pv.pixel_hash;
  }
}

TEST(VisionGolden, SmartResizeTable) {
  const nlohmann::json summary = nlohmann::json::parse(std::ifstream(vision_golden() / "golden" / "summary.json"));
  const auto& table = summary["smart_resize_table"];
  ASSERT_EQ(table.size(), 10u);
  for (const auto& [key, expected] : table.items()) {
    const auto x = key.find('x');
    const int64_t h = std::stoll(key.substr(0, x)), w = std::stoll(key.substr(x + 1));
    const auto [hb, wb] = smart_resize(h, w, 32, 65536, 16777216);
    EXPECT_EQ(hb, expected[0].get<int64_t>()) << key;
    EXPECT_EQ(wb, expected[1].get<int64_t>()) << key;
  }
}

TEST(VisionGolden, ReleasedConfigIsTheDefault) {
  const PreprocessorConfig c = load_preprocessor_config(vision_golden() / "tiny-vl" / "preprocessor_config.json");
  const PreprocessorConfig d;
  EXPECT_EQ(c.patch_size, d.patch_size);
  EXPECT_EQ(c.temporal_patch_size, d.temporal_patch_size);
  EXPECT_EQ(c.merge_size, d.merge_size);
  EXPECT_EQ(c.min_pixels, d.min_pixels);
  EXPECT_EQ(c.max_pixels, d.max_pixels);
  EXPECT_EQ(c.rescale_factor, d.rescale_factor);
  EXPECT_EQ(c.mean, d.mean);
  EXPECT_EQ(c.std, d.std);
}

// ---- smart_resize ---------------------------------------------------------------------

TEST(VisionSmartResize, RulesAndErrors) {
  // Python rounds 2.5 and 3.5 to even: 80/32 = 2.5 -> 2, 112/32 = 3.5 -> 4.
  EXPECT_EQ(smart_resize(80, 112, 32, 0, 1 << 24), (std::pair<int64_t, int64_t>{64, 128}));
  // Shrinking never goes below one factor on a side (the max(factor, ...) form).
  EXPECT_EQ(smart_resize(20, 3000, 32, 0, 32 * 32 * 10).first, 32);
  EXPECT_NE(thrown_message([] { smart_resize(10, 2001, 32, 65536, 16777216); }).find("aspect ratio above 200"), std::string::npos);
  EXPECT_NE(thrown_message([] { smart_resize(0, 10, 32, 0, 100); }).find("smart_resize(0x10)"), std::string::npos);
  // A side that rounds to nothing and no minimum to grow it.
  EXPECT_NE(thrown_message([] { smart_resize(10, 100, 32, 0, 1 << 24); }).find("empty image"), std::string::npos);
}

// ---- resize ---------------------------------------------------------------------------

// PIL's bicubic resample written the direct way, in float64 and without its
// fixed-point coefficients: each pass rounds to the nearest uint8.
std::vector<double> naive_weights(int64_t in, int64_t out, int64_t i, int64_t* first) {
  const double scale = double(in) / double(out), fs = std::max(scale, 1.0), support = 2 * fs;
  const double center = (i + 0.5) * scale;
  auto cubic = [](double x) {
    x = std::fabs(x);
    return x < 1 ? 1.5 * x * x * x - 2.5 * x * x + 1 : x < 2 ? -0.5 * x * x * x + 2.5 * x * x - 4 * x + 2 : 0.0;
  };
  const int64_t lo = std::max<int64_t>(0, int64_t(center - support + 0.5));
  const int64_t hi = std::min<int64_t>(in, int64_t(center + support + 0.5));
  std::vector<double> w;
  double total = 0;
  for (int64_t x = lo; x < hi; ++x) w.push_back(cubic((x + 0.5 - center) / fs)), total += w.back();
  for (double& v : w) v /= total;
  *first = lo;
  return w;
}

Image naive_resize(const Image& in, int64_t out_h, int64_t out_w) {
  auto to_u8 = [](double v) { return uint8_t(std::clamp(std::floor(v + 0.5), 0.0, 255.0)); };
  Image mid{out_w, in.height, std::vector<uint8_t>(size_t(out_w * in.height * 3))};
  for (int64_t x = 0; x < out_w; ++x) {
    int64_t first;
    const auto w = naive_weights(in.width, out_w, x, &first);
    for (int64_t y = 0; y < in.height; ++y)
      for (int c = 0; c < 3; ++c) {
        double s = 0;
        for (size_t j = 0; j < w.size(); ++j) s += w[j] * in.rgb[size_t((y * in.width + first + int64_t(j)) * 3 + c)];
        mid.rgb[size_t((y * out_w + x) * 3 + c)] = to_u8(s);
      }
  }
  Image out{out_w, out_h, std::vector<uint8_t>(size_t(out_w * out_h * 3))};
  for (int64_t y = 0; y < out_h; ++y) {
    int64_t first;
    const auto w = naive_weights(in.height, out_h, y, &first);
    for (int64_t i = 0; i < out_w * 3; ++i) {
      double s = 0;
      for (size_t j = 0; j < w.size(); ++j) s += w[j] * mid.rgb[size_t((first + int64_t(j)) * out_w * 3 + i)];
      out.rgb[size_t(y * out_w * 3 + i)] = to_u8(s);
    }
  }
  return out;
}

TEST(VisionResize, IdentityWhenTheSizeMatches) {
  const Image image = random_image(40, 24, 1);
  const Image same = resize_bicubic(image, 24, 40);
  EXPECT_EQ(same.width, 40);
  EXPECT_EQ(same.height, 24);
  EXPECT_TRUE(same.rgb == image.rgb);
}

TEST(VisionResize, ConstantStaysConstant) {
  for (uint8_t v : {uint8_t(0), uint8_t(1), uint8_t(128), uint8_t(255)}) {
    Image image{13, 7, std::vector<uint8_t>(13 * 7 * 3, v)};
    for (auto [h, w] : {std::pair<int64_t, int64_t>{3, 5}, {32, 64}, {7, 40}, {20, 13}}) {
      const Image out = resize_bicubic(image, h, w);
      ASSERT_EQ(out.rgb.size(), size_t(h * w * 3));
      for (uint8_t o : out.rgb) ASSERT_EQ(o, v) << "value " << int(v) << " to " << h << "x" << w;
    }
  }
}

TEST(VisionResize, HandComputedDownscale) {
  // Width 4 -> 2, one row of 0, 255, 0, 255. Shrinking by 2 widens the cubic to
  // support 4: output 0 has center 1 and taps at (x + 0.5 - 1) / 2 = -0.25,
  // 0.25, 0.75, 1.25 with weights .8671875, .8671875, .2265625, -.0703125
  // (sum 1.890625): 255 * (.8671875 - .0703125) / 1.890625 = 107.48 -> 107.
  // Output 1 (center 3): weights -.0703125, .2265625, .8671875, .8671875:
  // 255 * 1.09375 / 1.890625 = 147.52 -> 148.
  Image row{4, 1, {0, 0, 0, 255, 255, 255, 0, 0, 0, 255, 255, 255}};
  const Image out = resize_bicubic(row, 1, 2);
  EXPECT_EQ(out.rgb, (std::vector<uint8_t>{107, 107, 107, 148, 148, 148}));
}

TEST(VisionResize, CheckerAveragesWhenHalved) {
  // A 1-pixel checker halved: away from the borders every output pixel sees
  // the same weight on black and on white, so it is 127.5 before rounding.
  Image image{32, 32, std::vector<uint8_t>(32 * 32 * 3)};
  for (int64_t y = 0; y < 32; ++y)
    for (int64_t x = 0; x < 32; ++x)
      for (int c = 0; c < 3; ++c) image.rgb[size_t((y * 32 + x) * 3 + c)] = (x + y) % 2 ? 255 : 0;
  const Image out = resize_bicubic(image, 16, 16);
  for (int64_t y = 2; y < 14; ++y)
    for (int64_t x = 2; x < 14; ++x) {
      const int v = out.rgb[size_t((y * 16 + x) * 3)];
      EXPECT_TRUE(v == 127 || v == 128) << x << "," << y << ": " << v;
    }
}

TEST(VisionResize, MatchesTheFloat64Formula) {
  // PIL's 22-bit coefficients may move a value by one step against exact
  // arithmetic; nothing more.
  const Image image = random_image(37, 29, 7);
  for (auto [h, w] : {std::pair<int64_t, int64_t>{64, 96}, {10, 12}, {29, 80}, {50, 37}, {13, 100}}) {
    const Image ours = resize_bicubic(image, h, w), naive = naive_resize(image, h, w);
    ASSERT_EQ(ours.rgb.size(), naive.rgb.size());
    size_t equal = 0;
    int worst = 0;
    for (size_t i = 0; i < ours.rgb.size(); ++i) {
      worst = std::max(worst, std::abs(int(ours.rgb[i]) - int(naive.rgb[i])));
      equal += ours.rgb[i] == naive.rgb[i];
    }
    EXPECT_LE(worst, 1) << h << "x" << w;
    EXPECT_GE(double(equal) / double(ours.rgb.size()), 0.98) << h << "x" << w;
  }
}

TEST(VisionPreprocess, ResizesAndHashes) {
  const Image image = gradient(80, 48);
  const PixelValues pv = preprocess_image(image, PreprocessorConfig{});
  // smart_resize(48, 80) with the released limits is 224 x 352 (summary.json).
  EXPECT_EQ(pv.grid_thw, (std::array<int64_t, 3>{1, 14, 22}));
  EXPECT_EQ(pv.num_image_tokens(), 77);
  EXPECT_EQ(pv.rows, 14 * 22);
  EXPECT_EQ(pv.cols, 1536);
  // The two frames of a still image are equal: [c][t][py][px].
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < 256; ++i)
      ASSERT_EQ(pv.data[size_t(c * 512 + i)], pv.data[size_t(c * 512 + 256 + i)]);
  for (float v : pv.data) ASSERT_TRUE(v >= -1.0f && v <= 1.0f);
  // Same pixels, same hash; one pixel changed or another mean, another hash.
  EXPECT_EQ(preprocess_image(image, PreprocessorConfig{}).pixel_hash, pv.pixel_hash);
  Image changed = image;
  changed.rgb[100] ^= 0x40;
  EXPECT_NE(preprocess_image(changed, PreprocessorConfig{}).pixel_hash, pv.pixel_hash);
  PreprocessorConfig other;
  other.mean = {0.48145466, 0.4578275, 0.40821073};
  EXPECT_NE(preprocess_image(image, other).pixel_hash, pv.pixel_hash);
  // Without do_resize the size must already fit the patch grid.
  PreprocessorConfig keep;
  keep.do_resize = false;
  EXPECT_NE(thrown_message([&] { preprocess_image(image, keep); }).find("multiples of 32"), std::string::npos);
}

// ---- preprocessor_config.json -----------------------------------------------------------

TEST(VisionConfig, ReadsKeysAndRejectsBadValues) {
  ScratchDir dir;
  const fs::path file = dir.write(
      "pp.json", text_bytes(R"({"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2,
        "size": {"shortest_edge": 3136, "longest_edge": 1003520}, "max_pixels": 12845056,
        "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": 0.25, "do_normalize": false})"));
  const PreprocessorConfig c = load_preprocessor_config(file);
  EXPECT_EQ(c.patch_size, 14);
  EXPECT_EQ(c.min_pixels, 3136);
  EXPECT_EQ(c.max_pixels, 12845056);  // the top-level key wins, as in HF
  EXPECT_EQ(c.mean[1], 0.4578275);
  EXPECT_EQ(c.std, (std::array<double, 3>{0.25, 0.25, 0.25}));
  EXPECT_FALSE(c.do_normalize);
  EXPECT_TRUE(c.do_resize);

  const std::pair<const char*, const char*> bad[] = {
      {R"({"patch_size": 0})", "patch_size: below 1"},
      {R"({"patch_size": "16"})", "patch_size: not an integer"},
      {R"({"merge_size": 2.5})", "merge_size: not an integer"},
      {R"({"image_std": [0.5, 0, 0.5]})", "image_std: has a zero"},
      {R"({"image_mean": [0.5, 0.5]})", "image_mean: not a number or a list of 3 numbers"},
      {R"({"size": {"shortest_edge": 10}})", "size: needs shortest_edge and longest_edge"},
      {R"({"min_pixels": 100, "max_pixels": 10})", "min_pixels: 100 is above max_pixels 10"},
      {R"({"max_pixels": 99999999999})", "max_pixels: above"},
      {R"({"do_resize": 1})", "do_resize: not true or false"},
      {R"({"rescale_factor": -1})", "rescale_factor: not positive"},
      {R"({"resample": 2})", "resample: 2 (only 3, bicubic, is supported)"},
      {R"([1, 2])", "not a JSON object"},
      {R"({"patch_size": )", "not valid JSON"},
  };
  for (const auto& [text, problem] : bad) {
    const fs::path f = dir.write("bad.json", text_bytes(text));
    const std::string message = thrown_message([&] { load_preprocessor_config(f); });
    EXPECT_EQ(message.rfind(f.string() + ": ", 0), 0u) << text << " -> " << message;
    EXPECT_NE(message.find(problem), std::string::npos) << text << " -> " << message;
  }
  EXPECT_NE(thrown_message([&] { load_preprocessor_config(dir.path / "none.json"); }).find("none.json: cannot open"),
            std::string::npos);
}

// ---- decoding: formats and conversions ---------------------------------------------------

TEST(VisionDecode, PngColorTypesBecomeRgb) {
  const int64_t w = 5, h = 3;
  const Image rgb = random_image(w, h, 3);
  std::vector<uint8_t> gray(size_t(w * h)), alpha(size_t(w * h));
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = uint8_t(i * 17), alpha[i] = uint8_t(255 - i * 9);
  auto replicate = [](const std::vector<uint8_t>& g) {
    std::vector<uint8_t> out;
    for (uint8_t v : g) out.insert(out.end(), {v, v, v});
    return out;
  };
  auto decode = [](const std::vector<uint8_t>& bytes) { return decode_image_bytes(bytes, "test.png"); };

  EXPECT_EQ(decode(encode_png({w, h, 3}, widen(rgb.rgb))).rgb, rgb.rgb);
  EXPECT_EQ(decode(encode_png({w, h, 3, 8, true}, widen(rgb.rgb))).rgb, rgb.rgb) << "interlaced";
  EXPECT_EQ(decode(encode_png({w, h, 1}, widen(gray))).rgb, replicate(gray));
  std::vector<uint16_t> gray_alpha, rgba, rgb16;
  for (size_t i = 0; i < gray.size(); ++i) {
    gray_alpha.insert(gray_alpha.end(), {gray[i], alpha[i]});
    rgba.insert(rgba.end(), {rgb.rgb[3 * i], rgb.rgb[3 * i + 1], rgb.rgb[3 * i + 2], alpha[i]});
  }
  for (uint8_t v : rgb.rgb) rgb16.push_back(uint16_t(v << 8 | (255 - v)));  // the low byte must not matter
  // Alpha is dropped, not composited: PIL's convert("RGB").
  EXPECT_EQ(decode(encode_png({w, h, 2}, gray_alpha)).rgb, replicate(gray));
  EXPECT_EQ(decode(encode_png({w, h, 4}, rgba)).rgb, rgb.rgb);
  EXPECT_EQ(decode(encode_png({w, h, 3, 16}, rgb16)).rgb, rgb.rgb);

  // 1-bit gray: 0 and 1 become 0 and 255.
  std::vector<uint16_t> bits;
  for (size_t i = 0; i < gray.size(); ++i) bits.push_back(i % 3 == 0);
  std::vector<uint8_t> expect_bits;
  for (uint16_t b : bits) expect_bits.push_back(b ? 255 : 0);
  EXPECT_EQ(decode(encode_png({w, h, 1, 1}, bits)).rgb, replicate(expect_bits));

  // A palette with transparency: the colors, alpha dropped.
  PngSpec indexed{w, h, 1, 8};
  indexed.palette = {{{10, 20, 30}}, {{200, 100, 0}}, {{1, 2, 3}}};
  indexed.palette_alpha = {0, 128, 255};
  std::vector<uint16_t> index;
  std::vector<uint8_t> expect;
  for (size_t i = 0; i < gray.size(); ++i) {
    index.push_back(uint16_t(i % 3));
    for (uint8_t v : indexed.palette[i % 3]) expect.push_back(v);
  }
  EXPECT_EQ(decode(encode_png(indexed, index)).rgb, expect);
}

TEST(VisionDecode, JpegIsCloseToItsSource) {
  const Image image = gradient(67, 45);  // not a multiple of the 8x8 or 16x16 blocks
  for (bool progressive : {false, true}) {
    const Image back = decode_image_bytes(encode_jpeg(67, 45, 3, image.rgb, 95, progressive), "test.jpg");
    ASSERT_EQ(back.width, 67);
    ASSERT_EQ(back.height, 45);
    double total = 0;
    for (size_t i = 0; i < image.rgb.size(); ++i) total += std::abs(int(back.rgb[i]) - int(image.rgb[i]));
    EXPECT_LT(total / double(image.rgb.size()), 3.0) << (progressive ? "progressive" : "baseline");
  }
  // Gray JPEG: R = G = B.
  std::vector<uint8_t> gray(size_t(20 * 10));
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = uint8_t(i);
  const Image g = decode_image_bytes(encode_jpeg(20, 10, 1, gray, 95), "gray.jpg");
  for (size_t i = 0; i < gray.size(); ++i) {
    ASSERT_EQ(g.rgb[3 * i], g.rgb[3 * i + 1]);
    ASSERT_EQ(g.rgb[3 * i], g.rgb[3 * i + 2]);
    EXPECT_NEAR(g.rgb[3 * i], gray[i], 6);
  }
  // CMYK (Adobe, inverted: 255 = no ink). Stored (255, 155, 255, 205) is
  // C = 0, M = 100, Y = 0, K = 50: R = G... = (255 - K) * (255 - C) / 255.
  std::vector<uint8_t> cmyk;
  for (int i = 0; i < 16 * 16; ++i) cmyk.insert(cmyk.end(), {255, 155, 255, 205});
  const Image c = decode_image_bytes(encode_jpeg(16, 16, 4, cmyk, 100), "cmyk.jpg");
  EXPECT_NEAR(c.rgb[0], 205, 2);
  EXPECT_NEAR(c.rgb[1], 205.0 * 155 / 255, 2);
  EXPECT_NEAR(c.rgb[2], 205, 2);
}

TEST(VisionDecode, PpmWithComments) {
  const Image image = random_image(3, 2, 5);
  std::vector<uint8_t> bytes = text_bytes("P6 # made by hand\n3\t2 # size\n255\n");
  bytes.insert(bytes.end(), image.rgb.begin(), image.rgb.end());
  EXPECT_EQ(decode_image_bytes(bytes, "x.ppm").rgb, image.rgb);
  EXPECT_EQ(decode_image_bytes(encode_ppm(image), "y.ppm").rgb, image.rgb);
}

// ---- decoding: bad input ---------------------------------------------------------------------

// PNG's chunk CRC (ISO 3309 CRC-32, reflected polynomial 0xedb88320).
uint32_t crc32_of(const uint8_t* p, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = crc & 1 ? (crc >> 1) ^ 0xedb88320u : crc >> 1;
  }
  return ~crc;
}

// A PNG file of just the signature and an IHDR chunk (with a correct CRC).
std::vector<uint8_t> png_header_only(uint32_t width, uint32_t height) {
  // Byte by byte: GCC 12 warns (-Wstringop-overread, falsely) on inserting initializer lists.
  std::vector<uint8_t> out{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  auto put32 = [&out](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(v >> shift));
  };
  put32(width);
  put32(height);
  for (uint8_t b : {8, 2, 0, 0, 0}) out.push_back(b);  // 8-bit RGB
  put32(crc32_of(out.data() + 12, 17));
  return out;
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& origin, const std::string& problem,
                  const DecodeLimits& limits = {}) {
  const std::string message = thrown_message([&] { decode_image_bytes(bytes, origin, limits); });
  EXPECT_EQ(message.rfind(origin + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(problem), std::string::npos) << message;
}

TEST(VisionDecodeErrors, TruncatedPng) {
  const Image image = random_image(24, 16, 9);
  const std::vector<uint8_t> png = encode_png({24, 16, 3}, widen(image.rgb));
  // Every cut before the end of the image data fails; IEND (12 bytes) is not needed.
  for (size_t cut = 1; cut + 12 < png.size(); ++cut) {
    const std::vector<uint8_t> part(png.begin(), png.begin() + ptrdiff_t(cut));
    const std::string message = thrown_message([&] { decode_image_bytes(part, "messages[0].content[1].image_url"); });
    ASSERT_EQ(message.rfind("messages[0].content[1].image_url: ", 0), 0u) << "cut at " << cut << ": " << message;
  }
  EXPECT_EQ(decode_image_bytes(std::vector<uint8_t>(png.begin(), png.end() - 12), "no-iend.png").rgb, image.rgb);
}

TEST(VisionDecodeErrors, TruncatedJpeg) {
  const Image image = gradient(64, 48);
  const std::vector<uint8_t> jpeg = encode_jpeg(64, 48, 3, image.rgb, 90);
  for (size_t cut : {size_t(2), size_t(20), jpeg.size() / 3, jpeg.size() / 2, jpeg.size() - 10})
    expect_error({jpeg.begin(), jpeg.begin() + ptrdiff_t(cut)}, "cut.jpg", "JPEG");
  expect_error({jpeg.begin(), jpeg.begin() + ptrdiff_t(jpeg.size() / 2)}, "cut.jpg", "truncated data");
}

TEST(VisionDecodeErrors, SizesOutOfBounds) {
  expect_error(png_header_only(100000, 100000), "huge.png", "100000x100000, a side above the limit of 32768");
  // Within the side limit, above the pixel limit: refused on the header, so
  // no 1.2 GB buffer is made for a file of 33 bytes.
  expect_error(png_header_only(20000, 20000), "big.png", "more than 268435456 pixels");
  expect_error(png_header_only(0, 5), "zero.png", "image has no pixels (0x5)");
  expect_error(text_bytes("P6\n100000 100000\n255\n"), "huge.ppm", "a side above the limit of 32768");
  expect_error(text_bytes("P6\n0 5\n255\n"), "zero.ppm", "no pixels");
  expect_error(text_bytes("P6\n2 2\n255\nabc"), "short.ppm", "PPM: truncated data");
  expect_error(text_bytes("P6\n2 2\n65535\n"), "deep.ppm", "maxval 65535");
  const Image image = gradient(64, 48);
  expect_error(encode_jpeg(64, 48, 3, image.rgb), "big.jpg", "a side above the limit of 40", DecodeLimits{40, 1 << 20});
  expect_error(encode_png({64, 48, 3}, widen(image.rgb)), "big.png", "more than 1000 pixels", DecodeLimits{100, 1000});
}

TEST(VisionDecodeErrors, NotAnImage) {
  expect_error(text_bytes("hello, this is text"), "note.txt", "not a PNG, JPEG or PPM image");
  expect_error({}, "empty.png", "empty image data");
  ScratchDir dir;
  const fs::path empty = dir.write("empty.png", {});
  EXPECT_EQ(thrown_message([&] { decode_image(empty); }), empty.string() + ": empty image data");
  const fs::path missing = dir.path / "missing.png";
  EXPECT_EQ(thrown_message([&] { decode_image(missing); }), missing.string() + ": no such file");
  // Corrupt bytes inside a structurally whole PNG: a bad CRC.
  const Image image = random_image(8, 8, 2);
  std::vector<uint8_t> png = encode_png({8, 8, 3}, widen(image.rgb));
  png[png.size() / 2] ^= 0xff;
  expect_error(png, "corrupt.png", "PNG: ");
}

}  // namespace
}  // namespace deltagen
