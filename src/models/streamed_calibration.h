// Calibration for models larger than memory (what builds use): the
// checkpoint's decoder layers are read one at a time from its memory map,
// and every calibration window goes through layer i before any goes through
// layer i + 1. Each window starts from an empty state, as in calibrate(), and
// a layer's state depends only on that layer's inputs, so the statistics are
// calibrate()'s, computed in another order. Linear layers multiply in fp32
// (ReferenceOptions::fp32_linear) and the Gram matrices are fp32 sums; the
// rest of the layer math is the float64 reference's.
//
// Memory: one layer's float64 weights, the windows' residual streams
// [tokens][hidden], and that layer's Gram matrices; each finished layer's
// matrices go to nameless files on disk (Calibration::find reads them back
// one at a time). streamed_calibration_bytes predicts the peak.
#pragma once
#include <cstdint>
#include <vector>

#include "models/calibration.h"

namespace deltagen {

Calibration calibrate_streamed(const Checkpoint& ckpt, const std::vector<int64_t>& ids, const CalibrationOptions& o);

// The predicted peak memory, in bytes, of calibrate_streamed (the largest
// layer's weights and Gram matrices) and of calibrate() on the resident
// float64 reference (every weight and every site's Gram matrix at once).
int64_t streamed_calibration_bytes(const ModelConfig& cfg, int64_t tokens, const CalibrationOptions& o);
int64_t resident_calibration_bytes(const ModelConfig& cfg, int64_t tokens, const CalibrationOptions& o);

}  // namespace deltagen
