// Token ids to measure with: a deterministic pseudo-random sequence (the
// default: needs no tokenizer and no data set, and is the same on every
// machine), ids read from a file, or text encoded with the model's tokenizer.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace deltagen::measure {

// `count` ids uniform in [0, vocab), from splitmix64 seeded with `seed`.
std::vector<int64_t> pseudo_random_ids(int64_t count, int64_t vocab, uint64_t seed);

// Ids separated by whitespace and/or commas. Throws Error naming the file on
// anything else, or on an empty file.
std::vector<int64_t> read_ids_file(const std::filesystem::path& file);

// The text of `file` encoded with the tokenizer in `tokenizer_dir`
// (tokenizer.json, as the builder copies it next to the model). Throws Error
// when either is missing.
std::vector<int64_t> encode_text_file(const std::filesystem::path& file, const std::filesystem::path& tokenizer_dir);

// The whole file as bytes; Error naming it when it cannot be opened.
std::string read_file_bytes(const std::filesystem::path& file);

// ---- text to measure with (the fidelity card, quantization calibration) ----
// The checks every measurement on a user's text file makes, each a one-line
// Error naming the file: it exists and reads, it is not empty, it is valid
// UTF-8 (the message gives the offset of the first bad byte). Needs no
// tokenizer, so a command can run it before any slow work. Returns the bytes.
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

}  // namespace deltagen::measure
