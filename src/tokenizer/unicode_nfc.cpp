#include "tokenizer/unicode_nfc.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include "deltagen/error.h"

namespace deltagen::tok {
namespace {

const icu::Normalizer2* icu_instance(NormalizationForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case NormalizationForm::kNone:
      return nullptr;
    case NormalizationForm::kNFC:
      n = icu::Normalizer2::getNFCInstance(status);
      break;
    case NormalizationForm::kNFD:
      n = icu::Normalizer2::getNFDInstance(status);
      break;
    case NormalizationForm::kNFKC:
      n = icu::Normalizer2::getNFKCInstance(status);
      break;
    case NormalizationForm::kNFKD:
      n = icu::Normalizer2::getNFKDInstance(status);
      break;
  }
  if (U_FAILURE(status) || !n) fail("ICU", std::string("cannot load normalization data: ") + u_errorName(status));
  return n;
}

// Text whose code points all lie below U+0300 (UTF-8 lead bytes < 0xCC) is
// in NFC: those characters are NFC_Quick_Check=Yes and every character that
// composes with a preceding one is >= U+0300. The other forms decompose some of
// them (NFD: U+00E9 -> e + U+0301), so this shortcut is for NFC only.
bool trivially_nfc(std::string_view text) {
  for (unsigned char c : text)
    if (c >= 0xCC) return false;
  return true;
}

}  // namespace

UnicodeNormalizer::UnicodeNormalizer(NormalizationForm form) : form_(form), icu_normalizer_(icu_instance(form)) {}

std::string_view UnicodeNormalizer::normalize(std::string_view text, std::string& storage) const {
  if (form_ == NormalizationForm::kNone) return text;
  if (form_ == NormalizationForm::kNFC && trivially_nfc(text)) return text;
  auto* n = static_cast<const icu::Normalizer2*>(icu_normalizer_);
  UErrorCode status = U_ZERO_ERROR;
  icu::StringPiece piece(text.data(), int32_t(text.size()));
  if (n->isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return text;
  status = U_ZERO_ERROR;
  storage.clear();
  icu::StringByteSink<std::string> sink(&storage, int32_t(text.size() + text.size() / 4));
  n->normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) fail("normalizer", std::string("ICU normalization failed: ") + u_errorName(status));
  return storage;
}

bool is_word_character(char32_t cp) {
  UChar32 c = UChar32(cp);
  return c == '_' || u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_isdigit(c) ||
         (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_N_MASK)) != 0;
}

}  // namespace deltagen::tok
