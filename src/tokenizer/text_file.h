// A user's text file, read and checked before any slow work, and encoded with
// the model's tokenizer: what the fidelity card, quantization calibration and
// the quantization recipe all read (reading text is not measuring, so this
// sits below both the builder and measure/).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace deltagen {

// The whole file as bytes; Error naming it when it cannot be opened.
std::string read_file_bytes(const std::filesystem::path& file);

// The checks every command makes on a user's text file, each a one-line Error
// naming the file: it exists and reads, it is not empty, it is valid UTF-8
// (the message gives the offset of the first bad byte). Needs no tokenizer, so
// a command can run it before any slow work. Returns the bytes.
std::string validate_text_file(const std::filesystem::path& file);

// validate_text_file, then the text encoded with the tokenizer.json in
// `tokenizer_dir` (special-token markup stays ordinary text), at least
// `min_tokens` ids ("too short: N tokens, need at least M"). `text`, when
// given, receives the file's bytes (to hash or measure them without a
// second read).
inline constexpr int64_t kMinMeasuringTokens = 16;
std::vector<int64_t> load_text_for_measuring(const std::filesystem::path& file,
                                             const std::filesystem::path& tokenizer_dir,
                                             int64_t min_tokens = kMinMeasuringTokens, std::string* text = nullptr);

}  // namespace deltagen
