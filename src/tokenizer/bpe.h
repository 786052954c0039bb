// The BPE model of a byte-level tokenizer: vocabulary and merge ranks from
// tokenizer.json's "model" section, applied to one pre-token at a time.
// Works on raw bytes: vocabulary entries are converted out of the byte-level
// alphabet once, at load.
#pragma once
#include <cstdint>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_tables.h"

namespace deltagen::tok {

// Token ids must lie below this. Ids index tables, so a tokenizer.json
// claiming id 2^31 would cost tens of GB; real vocabularies stay below 2^18.
inline constexpr int64_t kMaxTokenIds = int64_t(1) << 22;

class BpeModel {
 public:
  // Throws Error naming `where` for anything malformed or unsupported.
  BpeModel(const nlohmann::json& model, const std::string& where);

  // Appends the ids of one pre-token (raw bytes) to `out`. Thread-safe.
  void encode_word(std::string_view word, std::vector<int64_t>& out) const;

  // 1 + the largest vocabulary id.
  int64_t id_limit() const { return int64_t(tokens_.size()); }
  bool has_id(int64_t id) const { return id >= 0 && id < id_limit() && tokens_[size_t(id)].present; }
  // The bytes a token stands for (has_id(id) must hold).
  const std::string& token_bytes(int64_t id) const { return tokens_[size_t(id)].bytes; }
  // The token as tokenizer.json writes it ("Ġhello").
  std::string token_string(int64_t id) const;
  std::optional<int64_t> find(std::string_view token_string) const;

 private:
  struct Token {
    std::string bytes;  // raw bytes, or the literal text if not in the byte-level alphabet
    bool byte_level = true;
    bool present = false;
  };
  void load_vocab(const nlohmann::json& vocab, const std::string& where);
  void load_merges(const nlohmann::json& merges, const std::string& where);
  // BPE without the cache: the ids of `word`, unknown bytes as kUnknown.
  void merge_word(std::string_view word, std::vector<int32_t>& ids) const;
  void append_ids(std::span<const int32_t> ids, std::vector<int64_t>& out) const;

  static constexpr int32_t kUnknown = -1;

  std::vector<Token> tokens_;                                  // by id
  std::unordered_map<std::string, int32_t> id_by_bytes_;       // byte-level tokens
  std::unordered_map<std::string, int32_t> id_by_other_text_;  // tokens outside the alphabet
  MergeTable merges_;
  int32_t byte_id_[256];  // single-byte tokens
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;

  // Pre-token -> ids. Words repeat a lot in text (Zipf), so most pre-tokens
  // skip BPE entirely.
  mutable std::mutex cache_mutex_;
  mutable WordCache cache_;
};

}  // namespace deltagen::tok
