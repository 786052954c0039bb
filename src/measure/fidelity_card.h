// The fidelity card: how far a built (e.g. quantized) model's next-token
// predictions are from an unquantized reference's on a text, written beside
// the model as fidelity.json (`deltagen card`, `deltagen build --card`) and
// shown by `deltagen inspect` and `deltagen serve`'s /v1/models.
//
// The text is teacher-forced through both (measure/compare.h: windows of
// `context` tokens from a fresh state, KL(reference || model) per position).
// The reference is a checkpoint folder (config.json + *.safetensors: the
// float64 C++ reference) or a built model folder (genai_config.json: e.g.
// the fp32 build). The text is encoded with the model folder's tokenizer.json,
// else the reference folder's.
//
// The card (fidelity.json), keys in this order:
//   card ("deltagen fidelity card"), version (1), model (folder name),
//   reference {kind: "checkpoint"|"model", name (folder name)},
//   text {file (name), bytes, sha256, tokens (the whole file's)},
//   tokenizer ("model"|"reference": whose tokenizer.json encoded the text),
//   tokens (used), positions (scored), windows,
//   kl {mean, median, p99, p999, max} (nats), top1_agreement,
//   ppl {model, reference, ratio (model / reference)}, rms_dp,
//   settings {context, max_tokens}, date (UTC, ISO 8601),
//   quantization (the model folder's quantization.json verbatim; absent
//   when the folder has none).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/fidelity_card_file.h"

namespace deltagen::measure {

struct CardOptions {
  std::filesystem::path text_file;
  std::filesystem::path reference;  // a checkpoint folder or a built model folder
  int64_t max_tokens = 4096;        // the first max_tokens tokens of the text
  int64_t context = 512;            // tokens per teacher-forced window (at most the model's context)
  int threads = 0;                  // ONNX Runtime intra-op threads; 0 = its default
  bool progress = false;            // a progress line on stderr
};

// Option ranges; Error naming the flag.
void validate(const CardOptions& o);

enum class ReferenceKind { Checkpoint, Model };
// What `dir` is; Error naming it when it is neither (or missing).
ReferenceKind reference_kind(const std::filesystem::path& dir);

// The folder whose tokenizer.json encodes the card's text: the model's, else
// the reference's; Error naming the model folder when neither has one.
std::filesystem::path card_tokenizer_dir(const std::filesystem::path& model_dir,
                                         const std::filesystem::path& reference);

// Every check that needs no model loaded: options, reference kind, and the
// text (load_text_for_measuring with `tokenizer_dir`). `deltagen build
// --card` runs it before building, with the checkpoint as the model folder
// (its tokenizer.json is the one the build copies).
void check_card_inputs(const CardOptions& o, const std::filesystem::path& tokenizer_dir);

// Measures the model in `model_dir` against o.reference: the card. Writes nothing.
nlohmann::ordered_json measure_fidelity_card(const std::filesystem::path& model_dir, const CardOptions& o);

// measure_fidelity_card, then model_dir/fidelity.json written atomically (on
// any Error nothing is written). Returns the card.
nlohmann::ordered_json write_fidelity_card(const std::filesystem::path& model_dir, const CardOptions& o);

}  // namespace deltagen::measure
