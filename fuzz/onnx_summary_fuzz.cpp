// Fuzzes the ONNX reader behind `deltagen inspect` (graph/model_summary):
// protobuf parsing, the required-field checks, the external-data accounting
// (location/offset/length strings checked against the data file's size) and
// both renderings, text and JSON.
//
// The input is written as model.onnx into a scratch folder that also holds a
// 4096-byte model.onnx.data, so external-data references can both succeed
// and run past the end of a real file.
#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "graph/model_summary.h"

using namespace deltagen;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool data_file = [] {
    std::string zeros(4096, '\0');
    fuzz::write_scratch("model.onnx.data", reinterpret_cast<const uint8_t*>(zeros.data()), zeros.size());
    return true;
  }();
  (void)data_file;
  const auto path = fuzz::write_scratch("model.onnx", data, size);
  fuzz::expect_only_error("summarize_model", [&] {
    graph::ModelSummary s = graph::summarize_model(path);
    if (s.external_bytes < 0 || s.inline_bytes < 0) fuzz::finding("negative weight bytes");
    (void)graph::summary_text(s);
    (void)graph::summary_json(s).dump(2);  // what `inspect --json` prints
  });
  return 0;
}
