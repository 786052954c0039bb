// Fuzzes the .npy reader (util/npy): magic, version, the Python-literal
// header dict (descr, fortran_order, shape) and the payload size it implies.
// Accepted arrays are converted with each accessor that fits their dtype.
#include "fuzz_util.h"
#include "util/npy.h"

using namespace deltagen;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = fuzz::write_scratch("array.npy", data, size);
  fuzz::expect_only_error("read_npy", [&] {
    NpyArray a = read_npy(path);
    if (a.numel() < 0) fuzz::finding("negative element count accepted");
    const bool is_float = a.descr == "<f4" || a.descr == "<f8";
    const bool is_int = a.descr == "<i4" || a.descr == "<i8";
    if (!is_float && !is_int) fuzz::finding("unsupported descr accepted: " + a.descr);
    const size_t element = a.descr[2] == '4' ? 4 : 8;
    if (a.bytes.size() != size_t(a.numel()) * element) fuzz::finding("payload size differs from shape x dtype");
    if (is_float) {
      if (a.as_f32().size() != size_t(a.numel()) || a.as_f64().size() != size_t(a.numel()))
        fuzz::finding("float conversion has the wrong size");
    } else if (a.as_i64().size() != size_t(a.numel())) {
      fuzz::finding("integer conversion has the wrong size");
    }
  });
  return 0;
}
