// deltagen's tokenizer: a Hugging Face tokenizer.json byte-level BPE
// tokenizer (the GPT-2 family, as Qwen2, Qwen3 and Qwen3.5 use it) that gives
// the same ids as Hugging Face's tokenizers, token for token.
//
//   auto tok = deltagen::Tokenizer::load("path/to/model");  // tokenizer.json (+ tokenizer_config.json)
//   std::vector<int64_t> ids = tok.encode("Hello <think>");
//   std::string text = tok.decode(ids);
//
//   auto stream = tok.incremental_decoder();                // while generating
//   for (int64_t id : generated) std::cout << stream.push(id);
//   std::cout << stream.finish();
//
// Supported tokenizer.json features: normalizer null / NFC / NFD / NFKC / NFKD
// (alone or in a Sequence); pre_tokenizer Split (Oniguruma regex or string,
// any behavior) and ByteLevel, alone or in a Sequence; model BPE; decoder
// ByteLevel; added tokens with special / lstrip / rstrip / normalized /
// single_word. Anything else is refused at load with a deltagen::Error.
//
// A Tokenizer is cheap to copy (shared, immutable state) and safe to use from
// several threads at once.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deltagen {

namespace tok {
class LossyUtf8Decoder;
}

// One entry of tokenizer.json's "added_tokens".
struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool special = false;      // a control token (<|im_end|>), skippable when decoding
  bool lstrip = false;       // swallows whitespace on its left
  bool rstrip = false;       // swallows whitespace on its right
  bool normalized = false;   // matched in normalized rather than raw text
  bool single_word = false;  // only matched when not inside a word
};

struct EncodeOptions {
  // Recognize special tokens written in the text. With false, text such as
  // "<|im_start|>" in untrusted input is encoded as ordinary text (HF's
  // split_special_tokens=True); non-special added tokens are still matched.
  bool parse_special_tokens = true;
};

struct DecodeOptions {
  bool skip_special_tokens = false;
};

class IncrementalDecoder;

class Tokenizer {
 public:
  // `path` is a folder with tokenizer.json (and optionally tokenizer_config.json),
  // or the tokenizer.json file itself. Throws Error when a file is missing,
  // malformed, or uses features this tokenizer does not support.
  static Tokenizer load(const std::filesystem::path& path);
  // The same from file contents; `name` is used in error messages.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json = {},
                             const std::string& name = "tokenizer.json");

  // Text (UTF-8) -> ids. Throws Error naming the byte offset if `text` is not
  // valid UTF-8. No BOS/EOS are added (Qwen's tokenizers add none).
  std::vector<int64_t> encode(std::string_view text, const EncodeOptions& options = {}) const;

  // Ids -> text. Bytes that do not form valid UTF-8 become U+FFFD, as in HF.
  // Throws Error for ids outside the vocabulary.
  std::string decode(std::span<const int64_t> ids, const DecodeOptions& options = {}) const;

  IncrementalDecoder incremental_decoder(const DecodeOptions& options = {}) const;

  // Token strings as tokenizer.json spells them ("Ġhello", "<|im_end|>").
  std::optional<int64_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int64_t id) const;
  // The bytes a token decodes to (not necessarily whole UTF-8 characters).
  // Throws Error for ids outside the vocabulary.
  std::string token_bytes(int64_t id) const;

  // Number of ids, added tokens included (HF's len(tokenizer)): 1 + largest id.
  int64_t vocab_size() const;

  const std::vector<AddedToken>& added_tokens() const;
  const AddedToken* added_token(int64_t id) const;  // nullptr if `id` is no added token
  bool is_special(int64_t id) const;
  std::vector<int64_t> special_token_ids() const;

  // From tokenizer_config.json (nullopt when absent or unset).
  std::optional<int64_t> bos_token_id() const;
  std::optional<int64_t> eos_token_id() const;
  std::optional<int64_t> pad_token_id() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
  friend class IncrementalDecoder;
};

// Decodes ids one at a time, as they are generated. Each push returns the text
// that became complete: never half a UTF-8 character (bytes of an unfinished
// character wait for the next ids). The pieces of a stream, plus finish(),
// concatenate to exactly what Tokenizer::decode gives for all the ids.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, const DecodeOptions& options = {});
  ~IncrementalDecoder();
  IncrementalDecoder(IncrementalDecoder&&) noexcept;
  IncrementalDecoder& operator=(IncrementalDecoder&&) noexcept;

  // Throws Error for ids outside the vocabulary (the stream is unchanged then).
  std::string push(int64_t id);
  std::string push(std::span<const int64_t> ids);
  // Ends the stream: an unfinished character becomes U+FFFD. The decoder can
  // then start a new stream.
  std::string finish();
  // Whether bytes of an unfinished character are waiting.
  bool has_pending() const;

 private:
  std::shared_ptr<const Tokenizer::Impl> impl_;
  DecodeOptions options_;
  std::unique_ptr<tok::LossyUtf8Decoder> utf8_;
};

// Offset of the first byte of `text` that is not valid UTF-8, or nullopt.
std::optional<size_t> find_invalid_utf8(std::string_view text);

}  // namespace deltagen
