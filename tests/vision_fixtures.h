// The --vision builds of ../shared/golden/vision/tiny-vl that the vision
// tests run (tests/vision_*_test.cpp).
#pragma once
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "models/build.h"
#include "test_util.h"

namespace deltagen::test {

// fp32, --vision (or not), no progress output; callers change what their case needs.
inline BuildOptions tiny_vl_options(bool vision = true) {
  BuildOptions o;
  o.precision = Precision::Fp32;
  o.vision = vision;
  o.show_progress = false;
  return o;
}

// Builds tiny-vl into `out` with `options`.
inline void build_tiny_vl(const fs::path& out, const BuildOptions& options = tiny_vl_options()) {
  build_model(*Checkpoint::open(vision_golden_dir() / "tiny-vl"), options, out);
}

// The golden case's min_pixels (4096) in a built model folder's
// preprocessor_config.json, so the 64x96 golden image is not resized.
inline void use_golden_min_pixels(const fs::path& model_dir) {
  const fs::path file = model_dir / "preprocessor_config.json";
  auto pre = nlohmann::json::parse(read_text(file));
  pre["size"]["shortest_edge"] = 4096;
  std::ofstream(file) << pre.dump();
}

}  // namespace deltagen::test
