// Pre-tokenization: cutting normalized text into the words BPE runs on.
// tokenizer.json's patterns are written for Oniguruma (what HF's Rust crate
// uses); they are translated to PCRE2 and matched with PCRE2's JIT.
#pragma once
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace deltagen::tok {

using PieceSink = std::function<void(std::string_view)>;

// Rewrites an Oniguruma pattern so PCRE2 (UTF + UCP) matches the same text:
//   \s \S  -> \p{White_Space} / \P{White_Space}   (PCRE2's \s differs at U+0085)
//   \d \D \w \W \h \H -> explicit Unicode classes (Oniguruma's \h is a hex digit)
//   (?i:...) -> ASCII-only case folding, [sS] per letter, as HF's tokenizers do
//   \uHHHH -> \x{HHHH}, \v -> \x{0B}, {,n} -> {0,n}
// Throws Error for constructs it cannot translate (nested classes, &&,
// inline flag groups other than (?i:).
std::string oniguruma_to_pcre2(std::string_view pattern);

// How a Split keeps the text around its matches (tokenizers' SplitDelimiterBehavior).
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

class RegexSplitter {
 public:
  // `pattern` is PCRE2 syntax; throws Error (naming `where`) if it does not compile.
  RegexSplitter(const std::string& pattern, SplitBehavior behavior, bool invert, const std::string& where);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Emits the non-empty pieces of `text` (valid UTF-8) in order.
  void split(std::string_view text, const PieceSink& emit) const;

 private:
  // Calls on_segment for each non-empty gap (false) and match (true), in order.
  void for_each_segment(std::string_view text, const std::function<void(size_t, size_t, bool)>& on_segment) const;

  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  SplitBehavior behavior_;
  bool invert_;
  std::string where_;
};

// The "pre_tokenizer" section: null, Split, ByteLevel, or a Sequence of them.
class PreTokenizer {
 public:
  // Throws Error naming `where` for unsupported types or bad patterns.
  static PreTokenizer from_json(const nlohmann::json& config, const std::string& where);

  // Emits the words of `text` (valid UTF-8), as raw bytes.
  void split(std::string_view text, const PieceSink& emit) const;

  // Whether a ByteLevel step is present (the vocabulary is then byte-level).
  bool byte_level() const { return byte_level_; }

 private:
  struct Step {
    std::shared_ptr<RegexSplitter> regex;  // null: the step does not split
    bool add_prefix_space = false;
  };
  void add_steps(const nlohmann::json& config, const std::string& where);
  void run_steps(size_t first_step, std::string_view text, const PieceSink& emit) const;

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace deltagen::tok
