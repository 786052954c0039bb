// Calibration for the quantization methods (quant/quant_methods.h): a text,
// encoded with the checkpoint's tokenizer, is run through the float64
// reference in windows that each start from an empty state, and the input of
// every Linear layer is summed into quant::InputStats (the Gram matrix of its
// channels). Projections that read one input (q, k and v; gate and up; the
// four Gated DeltaNet input projections) share one set: a "site".
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "quant/quant_methods.h"
#include "reference/qwen35_reference.h"

namespace deltagen {

struct CalibrationOptions {
  int64_t max_tokens = 512;  // of the text's tokens, from its start
  int64_t window = 256;      // tokens per window (each from an empty state)
  bool full_gram = true;     // the whole Gram matrix (gptq), else its diagonal (search)
  bool progress = false;     // a progress line on a terminal
};

// A Gram matrix's lower triangle on disk, in a file that has no name (made
// in the temp directory, $TMPDIR, and unlinked at once): the disk space goes
// back when the last owner closes it, even if the build is killed.
class SpilledGram {
 public:
  // Writes rows 0..k-1 of i + 1 fp32 values from gram_lower ([k][k]).
  SpilledGram(const std::vector<float>& gram_lower, int64_t k);
  ~SpilledGram();
  SpilledGram(const SpilledGram&) = delete;
  SpilledGram& operator=(const SpilledGram&) = delete;
  // The statistics back: this Gram matrix (float64), tokens and diagonal from `summary`.
  std::shared_ptr<quant::InputStats> read(const quant::InputStats& summary) const;
  bool linked() const;  // still has a name somewhere (for tests: it should not)

 private:
  int fd_ = -1;
  int64_t k_ = 0;
};

// The weights that read one input, in the order the reference reads them.
struct CalibrationSite {
  std::vector<std::string> weights;  // checkpoint names
  // In memory; a streamed calibration's keeps the diagonal and the token
  // count here and the Gram matrix in `spilled` (read back by find()).
  std::shared_ptr<quant::InputStats> stats;
  std::shared_ptr<const SpilledGram> spilled;  // null when the Gram matrix is in memory
};

struct Calibration {
  std::vector<CalibrationSite> sites;
  int64_t tokens = 0;
  // The statistics of the input `weight` reads (nullptr if none was seen),
  // a spilled site's Gram matrix read back from disk.
  std::shared_ptr<const quant::InputStats> find(const std::string& weight) const;
  const CalibrationSite* site_of(const std::string& weight) const;
};

// The token ids of a calibration text: encoded with the tokenizer in
// `tokenizer_dir`. Throws Error naming the file when it is missing, empty, not
// UTF-8, or shorter than `min_tokens` tokens, or when the tokenizer is missing.
std::vector<int64_t> calibration_ids(const std::filesystem::path& text, const std::filesystem::path& tokenizer_dir,
                                     int64_t min_tokens);

Calibration calibrate(const ReferenceModel& model, const std::vector<int64_t>& ids, const CalibrationOptions& o);

}  // namespace deltagen
