// Unicode normalization (the tokenizer.json "normalizer" section) and the
// character properties the added-token matcher needs, both from ICU.
//
// Why ICU: Debian's libicu-dev is already installed here and ships the full
// Unicode normalization data and algorithm (composition exclusions, Hangul,
// canonical ordering); re-implementing NFC from generated tables would mean
// more code to get wrong for no gain.
#pragma once
#include <string>
#include <string_view>

namespace deltagen::tok {

enum class NormalizationForm { kNone, kNFC, kNFD, kNFKC, kNFKD };

class UnicodeNormalizer {
 public:
  explicit UnicodeNormalizer(NormalizationForm form = NormalizationForm::kNone);

  // `text` (valid UTF-8) in the normal form. Returns `text` itself when it
  // already is normalized (the common case), else the result stored in
  // `storage`.
  std::string_view normalize(std::string_view text, std::string& storage) const;

  bool active() const { return form_ != NormalizationForm::kNone; }

 private:
  NormalizationForm form_;
  const void* icu_normalizer_ = nullptr;  // const icu::Normalizer2*, owned by ICU
};

// Letters, marks, numbers and '_': what may not touch a single_word token.
bool is_word_character(char32_t cp);

}  // namespace deltagen::tok
