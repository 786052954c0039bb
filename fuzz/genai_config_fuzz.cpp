// Fuzzes genai_config.json parsing (runtime/genai_config), the file
// `generate` and the Engine read first from a model folder. Besides the
// Error-only contract: the model file it names must lie inside the folder.
#include "fuzz_util.h"
#include "runtime/genai_config.h"

using namespace deltagen;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = fuzz::write_scratch("genai_config.json", data, size);
  fuzz::expect_only_error("load_genai_config", [&] {
    GenaiConfig c = load_genai_config(path);
    if (c.model_filename.empty()) fuzz::finding("empty model file name accepted");
    // The model file must stay inside the model folder.
    const fuzz::fs::path name(c.model_filename);
    if (name.is_absolute()) fuzz::finding("absolute model file name accepted: " + c.model_filename);
    for (const auto& part : name)
      if (part == "..") fuzz::finding("model file name leading out of the folder accepted: " + c.model_filename);
  });
  return 0;
}
