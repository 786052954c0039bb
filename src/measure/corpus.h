// Token ids to measure with: a deterministic pseudo-random sequence (the
// default: needs no tokenizer and no data set, and is the same on every
// machine), ids read from a file, or text encoded with the model's tokenizer
// (a user's text file is read and checked by tokenizer/text_file.h).
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

}  // namespace deltagen::measure
