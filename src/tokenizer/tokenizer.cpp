// Loading tokenizer.json and running the pipeline HF runs:
//   added tokens (raw text) -> normalizer -> added tokens (normalized text)
//   -> pre-tokenizer -> BPE per word.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"
#include "deltagen/error.h"

namespace deltagen {

namespace fs = std::filesystem;
using nlohmann::json;

struct Tokenizer::Impl {
  std::string name;  // for error messages
  tok::UnicodeNormalizer normalizer;
  tok::PreTokenizer pre_tokenizer;
  std::unique_ptr<tok::BpeModel> bpe;
  std::vector<AddedToken> added;
  std::unordered_map<int64_t, size_t> added_by_id;
  std::unordered_map<std::string, size_t> added_by_content;
  tok::AddedTokenMatcher raw_matcher;         // tokens matched before normalization
  tok::AddedTokenMatcher normalized_matcher;  // tokens matched after it (content normalized too)
  int64_t id_limit = 0;
  std::optional<int64_t> bos, eos, pad;

  // ---- encoding ----
  void encode_text(std::string_view text, const EncodeOptions& options, std::vector<int64_t>& out) const;
  void encode_normalized(std::string_view text, const EncodeOptions& options, std::vector<int64_t>& out) const;
  void encode_words(std::string_view text, std::vector<int64_t>& out) const;
  // Splits `text` around the added tokens `matcher` finds: calls on_text for
  // the stretches between them and pushes the tokens' ids to `out`.
  void split_on_added_tokens(std::string_view text, const tok::AddedTokenMatcher& matcher, const EncodeOptions& options,
                             std::vector<int64_t>& out, const std::function<void(std::string_view)>& on_text) const;
  bool single_word_boundaries_ok(std::string_view text, size_t begin, size_t end) const;

  // ---- decoding ----
  void check_id(int64_t id) const;
  const AddedToken* find_added(int64_t id) const {
    auto it = added_by_id.find(id);
    return it == added_by_id.end() ? nullptr : &added[it->second];
  }
  // Appends the text `id` completes; `utf8` carries unfinished characters.
  void decode_one(int64_t id, const DecodeOptions& options, tok::LossyUtf8Decoder& utf8, std::string& out) const;
};

namespace {

std::string read_file(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) fail(path.string(), "not found");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json parse_json(std::string_view text, const std::string& name) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail(name, std::string("malformed JSON: ") + e.what());
  }
}

tok::NormalizationForm parse_normalizer(const json& config, const std::string& where) {
  if (config.is_null()) return tok::NormalizationForm::kNone;
  std::string type = config.at("type").get<std::string>();
  if (type == "NFC") return tok::NormalizationForm::kNFC;
  if (type == "NFD") return tok::NormalizationForm::kNFD;
  if (type == "NFKC") return tok::NormalizationForm::kNFKC;
  if (type == "NFKD") return tok::NormalizationForm::kNFKD;
  if (type == "Sequence") {
    const auto& steps = config.at("normalizers");
    if (steps.empty()) return tok::NormalizationForm::kNone;
    if (steps.size() == 1) return parse_normalizer(steps[0], where);
  }
  fail(where, "normalizer " + config.dump() + " is not supported (supported: NFC, NFD, NFKC, NFKD)");
}

void require_byte_level_decoder(const json& decoder, const std::string& where) {
  if (decoder.is_object() && decoder.value("type", std::string()) == "ByteLevel") return;
  fail(where, "decoder " + decoder.dump() + " is not supported (only ByteLevel)");
}

void require_supported_post_processor(const json& pp, const std::string& where) {
  // ByteLevel's post-processing only trims offsets; ids stay as they are.
  if (pp.is_null() || (pp.is_object() && pp.value("type", std::string()) == "ByteLevel")) return;
  fail(where, "post_processor type '" + pp.value("type", std::string("?")) + "' is not supported (only ByteLevel)");
}

AddedToken parse_added_token(const json& j) {
  AddedToken t;
  t.id = j.at("id").get<int64_t>();
  t.content = j.at("content").get<std::string>();
  t.special = j.value("special", false);
  t.lstrip = j.value("lstrip", false);
  t.rstrip = j.value("rstrip", false);
  t.single_word = j.value("single_word", false);
  t.normalized = j.value("normalized", !t.special);
  return t;
}

// tokenizer_config.json writes special tokens as "<s>" or {"content": "<s>", ...}.
std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

// ---- loading ------------------------------------------------------------------------

Tokenizer Tokenizer::load(const fs::path& path) {
  std::error_code ec;
  bool names_file = path.extension() == ".json" || fs::is_regular_file(path, ec);
  fs::path json_path = names_file ? path : path / "tokenizer.json";
  std::string tokenizer_json = read_file(json_path);
  fs::path config_path = json_path.parent_path() / "tokenizer_config.json";
  std::string config_json = fs::is_regular_file(config_path, ec) ? read_file(config_path) : std::string();
  try {
    return from_json(tokenizer_json, config_json, json_path.string());
  } catch (const Error& e) {
    // from_json names files by their base names; say which config file failed.
    std::string message = e.what();
    if (message.rfind("tokenizer_config.json:", 0) == 0) throw Error(config_path.string() + message.substr(21));
    throw;
  }
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                               const std::string& name) {
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  json root = parse_json(tokenizer_json, name);
  json config =
      tokenizer_config_json.empty() ? json::object() : parse_json(tokenizer_config_json, "tokenizer_config.json");
  try {
    if (!root.is_object() || !root.contains("model")) fail(name, "no \"model\" section");
    impl->bpe = std::make_unique<tok::BpeModel>(root["model"], name);
    impl->normalizer = tok::UnicodeNormalizer(parse_normalizer(root.value("normalizer", json()), name));
    impl->pre_tokenizer = tok::PreTokenizer::from_json(root.value("pre_tokenizer", json()), name);
    if (!impl->pre_tokenizer.byte_level())
      fail(name, "pre_tokenizer has no ByteLevel step: only byte-level BPE tokenizers are supported");
    require_byte_level_decoder(root.value("decoder", json()), name);
    require_supported_post_processor(root.value("post_processor", json()), name);

    impl->id_limit = impl->bpe->id_limit();
    for (const json& j : root.value("added_tokens", json::array())) {
      AddedToken t = parse_added_token(j);
      if (t.id < 0 || t.id >= tok::kMaxTokenIds)
        fail(name, "added token '" + t.content + "' has id " + std::to_string(t.id) + ", outside [0, " +
                       std::to_string(tok::kMaxTokenIds) + ")");
      auto index = int32_t(impl->added.size());
      impl->added_by_id[t.id] = size_t(index);
      impl->added_by_content.emplace(t.content, size_t(index));
      if (t.normalized && impl->normalizer.active()) {
        std::string storage;
        impl->normalized_matcher.add(impl->normalizer.normalize(t.content, storage), index);
      } else {
        impl->raw_matcher.add(t.content, index);
      }
      impl->id_limit = std::max(impl->id_limit, t.id + 1);
      impl->added.push_back(std::move(t));
    }
  } catch (const json::exception& e) {
    fail(name, std::string("unexpected content: ") + e.what());
  }

  Tokenizer tokenizer(impl);
  auto resolve = [&](const char* key) -> std::optional<int64_t> {
    auto content = config_token(config, key);
    if (!content) return std::nullopt;
    auto id = tokenizer.token_to_id(*content);
    if (!id) fail("tokenizer_config.json", std::string(key) + " '" + *content + "' is not in the vocabulary");
    return id;
  };
  try {
    impl->bos = resolve("bos_token");
    impl->eos = resolve("eos_token");
    impl->pad = resolve("pad_token");
  } catch (const json::exception& e) {
    fail("tokenizer_config.json", std::string("unexpected content: ") + e.what());
  }
  return tokenizer;
}

// ---- encoding -----------------------------------------------------------------------

std::vector<int64_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  if (auto bad = tok::find_invalid_utf8(text)) fail("text", "invalid UTF-8 at byte offset " + std::to_string(*bad));
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3);
  impl_->encode_text(text, options, ids);
  return ids;
}

void Tokenizer::Impl::encode_text(std::string_view text, const EncodeOptions& options,
                                  std::vector<int64_t>& out) const {
  split_on_added_tokens(text, raw_matcher, options, out, [&](std::string_view section) {
    std::string storage;
    encode_normalized(normalizer.normalize(section, storage), options, out);
  });
}

void Tokenizer::Impl::encode_normalized(std::string_view text, const EncodeOptions& options,
                                        std::vector<int64_t>& out) const {
  if (normalized_matcher.empty()) {
    encode_words(text, out);
    return;
  }
  split_on_added_tokens(text, normalized_matcher, options, out,
                        [&](std::string_view section) { encode_words(section, out); });
}

void Tokenizer::Impl::encode_words(std::string_view text, std::vector<int64_t>& out) const {
  pre_tokenizer.split(text, [&](std::string_view word) { bpe->encode_word(word, out); });
}

namespace {

// The code point that ends just before `pos` / starts at `pos` (valid UTF-8).
char32_t code_point_before(std::string_view text, size_t pos, size_t& length) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  size_t i = start;
  length = pos - start;
  return tok::next_code_point(text, i).value_or(0);
}

char32_t code_point_at(std::string_view text, size_t pos, size_t& length) {
  size_t i = pos;
  char32_t cp = tok::next_code_point(text, i).value_or(0);
  length = i - pos;
  return cp;
}

}  // namespace

bool Tokenizer::Impl::single_word_boundaries_ok(std::string_view text, size_t begin, size_t end) const {
  size_t length = 0;
  if (begin > 0 && tok::is_word_character(code_point_before(text, begin, length))) return false;
  if (end < text.size() && tok::is_word_character(code_point_at(text, end, length))) return false;
  return true;
}

void Tokenizer::Impl::split_on_added_tokens(std::string_view text, const tok::AddedTokenMatcher& matcher,
                                            const EncodeOptions& options, std::vector<int64_t>& out,
                                            const std::function<void(std::string_view)>& on_text) const {
  auto allowed = [&](int32_t index) { return options.parse_special_tokens || !added[size_t(index)].special; };
  size_t text_start = 0, search_from = 0;
  while (auto m = matcher.find(text, search_from, allowed)) {
    const AddedToken& token = added[size_t(m->index)];
    if (token.single_word && !single_word_boundaries_ok(text, m->begin, m->end)) {
      search_from = m->begin + 1;
      continue;
    }
    size_t begin = m->begin, end = m->end, length = 0;
    // lstrip/rstrip: the token takes the whitespace next to it along.
    while (token.lstrip && begin > text_start && tok::is_white_space(code_point_before(text, begin, length)))
      begin -= length;
    while (token.rstrip && end < text.size() && tok::is_white_space(code_point_at(text, end, length))) end += length;
    if (begin > text_start) on_text(text.substr(text_start, begin - text_start));
    out.push_back(token.id);
    text_start = search_from = end;
  }
  if (text_start < text.size()) on_text(text.substr(text_start));
}

// ---- decoding -----------------------------------------------------------------------

void Tokenizer::Impl::check_id(int64_t id) const {
  if (id < 0 || id >= id_limit || (!bpe->has_id(id) && !added_by_id.count(id)))
    fail("decode", "token id " + std::to_string(id) + " is out of range (the tokenizer has " +
                       std::to_string(id_limit) + " ids)");
}

void Tokenizer::Impl::decode_one(int64_t id, const DecodeOptions& options, tok::LossyUtf8Decoder& utf8,
                                 std::string& out) const {
  if (const AddedToken* token = find_added(id)) {
    if (token->special && options.skip_special_tokens) return;
    // Added tokens are text, not byte-level symbols; they also end any
    // unfinished character before them (HF decodes the runs between them separately).
    utf8.flush(out);
    out += token->content;
    return;
  }
  utf8.feed(bpe->token_bytes(id), out);
}

std::string Tokenizer::decode(std::span<const int64_t> ids, const DecodeOptions& options) const {
  for (int64_t id : ids) impl_->check_id(id);
  std::string out;
  tok::LossyUtf8Decoder utf8;
  for (int64_t id : ids) impl_->decode_one(id, options, utf8, out);
  utf8.flush(out);
  return out;
}

IncrementalDecoder Tokenizer::incremental_decoder(const DecodeOptions& options) const {
  return IncrementalDecoder(*this, options);
}

// ---- vocabulary queries -------------------------------------------------------------

std::optional<int64_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->added_by_content.find(std::string(token));
  if (it != impl_->added_by_content.end()) return impl_->added[it->second].id;
  return impl_->bpe->find(token);
}

std::optional<std::string> Tokenizer::id_to_token(int64_t id) const {
  if (const AddedToken* t = impl_->find_added(id)) return t->content;
  if (impl_->bpe->has_id(id)) return impl_->bpe->token_string(id);
  return std::nullopt;
}

std::string Tokenizer::token_bytes(int64_t id) const {
  impl_->check_id(id);
  if (const AddedToken* t = impl_->find_added(id)) return t->content;
  return impl_->bpe->token_bytes(id);
}

int64_t Tokenizer::vocab_size() const { return impl_->id_limit; }
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
const AddedToken* Tokenizer::added_token(int64_t id) const { return impl_->find_added(id); }

bool Tokenizer::is_special(int64_t id) const {
  const AddedToken* t = impl_->find_added(id);
  return t && t->special;
}

std::vector<int64_t> Tokenizer::special_token_ids() const {
  std::vector<int64_t> ids;
  for (const auto& t : impl_->added)
    if (t.special) ids.push_back(t.id);
  return ids;
}

std::optional<int64_t> Tokenizer::bos_token_id() const { return impl_->bos; }
std::optional<int64_t> Tokenizer::eos_token_id() const { return impl_->eos; }
std::optional<int64_t> Tokenizer::pad_token_id() const { return impl_->pad; }

std::optional<size_t> find_invalid_utf8(std::string_view text) { return tok::find_invalid_utf8(text); }

// ---- IncrementalDecoder -------------------------------------------------------------

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, const DecodeOptions& options)
    : impl_(tokenizer.impl_), options_(options), utf8_(std::make_unique<tok::LossyUtf8Decoder>()) {}
IncrementalDecoder::~IncrementalDecoder() = default;
IncrementalDecoder::IncrementalDecoder(IncrementalDecoder&&) noexcept = default;
IncrementalDecoder& IncrementalDecoder::operator=(IncrementalDecoder&&) noexcept = default;

std::string IncrementalDecoder::push(int64_t id) {
  impl_->check_id(id);
  std::string out;
  impl_->decode_one(id, options_, *utf8_, out);
  return out;
}

std::string IncrementalDecoder::push(std::span<const int64_t> ids) {
  for (int64_t id : ids) impl_->check_id(id);
  std::string out;
  for (int64_t id : ids) impl_->decode_one(id, options_, *utf8_, out);
  return out;
}

std::string IncrementalDecoder::finish() {
  std::string out;
  utf8_->flush(out);
  return out;
}

bool IncrementalDecoder::has_pending() const { return utf8_->has_pending(); }

}  // namespace deltagen
