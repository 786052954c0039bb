// The tokenizer (src/tokenizer):
//   TokenizerUnit*  - a tiny handmade tokenizer.json: BPE ranks, added tokens
//                     and their flags, UTF-8 handling, regex translation, errors.
//   TokenizerQwen3* - the real Qwen3 tokenizer against Hugging Face's reference
//                     implementation (tests/tokenizer_reference.mjs in node) on
//                     the >200 KB corpus of tests/tokenizer_corpus.h: identical
//                     ids, round trips, streaming decode, the CLI, speed.
// The Qwen3 tests need scripts/fetch_tokenizer_assets.sh to have run (setup
// does) and node; they skip, saying why, only when those are missing.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "test_util.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/utf8.h"
#include "tokenizer_corpus.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

using nlohmann::json;
using test::TempDir;
namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;

const std::string kQwenRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

void write_file(const fs::path& p, const std::string& content) {
  std::ofstream out(p, std::ios::binary);
  out << content;
}

bool valid_utf8(const std::string& s) { return !find_invalid_utf8(s).has_value(); }

// The message of the Error `fn` throws ("" if none), checked to be one line.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << "not one line: " << m;
    return m;
  }
  return "";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ==== a tiny handmade tokenizer =====================================================
//
// Vocabulary: the 256 byte symbols (id = byte value), then a few merges.
// Added tokens: <|end|> (special), <x> and <x>y (longest match), <ls> (lstrip),
// <rs> (rstrip), "word" (single_word), "café" (normalized).

const std::vector<std::pair<std::string, std::string>> kTinyMerges = {
    {"h", "e"},    {"l", "l"},     {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"},
    {"Ġwor", "l"}, {"Ġworl", "d"}, {"b", "c"},   {"a", "b"},    {"a", "a"}, {"Ã", "©"}};
constexpr int64_t kHello = 259, kSpaceWorld = 264, kBC = 265, kAA = 267;
constexpr int64_t kEnd = 300, kX = 301, kXy = 302, kLs = 303, kRs = 304, kWord = 305, kCafe = 306;

json tiny_tokenizer_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[tok::bytes_to_byte_level(std::string(1, char(b)))] = b;
  json merges = json::array();
  int next_id = 256;
  for (const auto& [l, r] : kTinyMerges) {
    merges.push_back(json::array({l, r}));
    vocab[l + r] = next_id++;
  }
  auto added = [](int64_t id, const std::string& content, bool special, json flags = json::object()) {
    json t = {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
              {"rstrip", false}, {"normalized", false}, {"special", special}};
    for (auto& [k, v] : flags.items()) t[k] = v;
    return t;
  };
  json added_tokens = json::array(
      {added(kEnd, "<|end|>", true), added(kX, "<x>", false), added(kXy, "<x>y", false),
       added(kLs, "<ls>", false, {{"lstrip", true}}), added(kRs, "<rs>", false, {{"rstrip", true}}),
       added(kWord, "word", false, {{"single_word", true}}), added(kCafe, "caf\u00e9", false, {{"normalized", true}})});
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  return {
      {"version", "1.0"},
      {"added_tokens", added_tokens},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"}, {"pattern", {{"Regex", kQwenRegex}}}, {"behavior", "Isolated"}, {"invert", false}},
              byte_level})}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"dropout", nullptr}, {"unk_token", nullptr}}},
  };
}

const Tokenizer& tiny() {
  static const Tokenizer t = Tokenizer::from_json(tiny_tokenizer_json().dump(),
                                                  R"({"eos_token": "<|end|>", "pad_token": {"content": "<x>"}})");
  return t;
}

Ids bytes_of(const std::string& s) { return Ids(s.begin(), s.end()); }
Ids bytes_of_u(const std::string& s) {
  Ids ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

TEST(TokenizerUnit, BpeAppliesMergesByRank) {
  EXPECT_EQ(tiny().encode("hello world"), (Ids{kHello, kSpaceWorld}));
  // "b c" ranks before "a b", so abc -> a + bc, not ab + c.
  EXPECT_EQ(tiny().encode("abc"), (Ids{'a', kBC}));
  // Equal ranks: the leftmost pair merges first.
  EXPECT_EQ(tiny().encode("aaa"), (Ids{kAA, 'a'}));
  EXPECT_EQ(tiny().encode("aaaa"), (Ids{kAA, kAA}));
  EXPECT_EQ(tiny().encode(""), Ids{});
  // Non-ASCII goes byte by byte, merged where a merge exists (é = C3 A9).
  EXPECT_EQ(tiny().encode("\u00e9"), (Ids{268}));
  EXPECT_EQ(tiny().encode("\u4f60"), bytes_of_u("\u4f60"));
}

TEST(TokenizerUnit, RegexSplitsDigitsAndContractionsLikeQwen) {
  // Digits one by one; "'s" and "'S" split off, "'ſ" does not (ASCII-only case folding).
  EXPECT_EQ(tiny().encode("123"), (Ids{'1', '2', '3'}));
  Ids its = tiny().encode("it'S");
  EXPECT_EQ(its, (Ids{'i', 't', '\'', 'S'}));
}

TEST(TokenizerUnit, AddedTokensTakeTheLongestMatch) {
  EXPECT_EQ(tiny().encode("<x>y"), (Ids{kXy}));
  EXPECT_EQ(tiny().encode("<x>z"), (Ids{kX, 'z'}));
  EXPECT_EQ(tiny().encode("<x"), (Ids{'<', 'x'}));
  EXPECT_EQ(tiny().encode("a<|end|>b"), (Ids{'a', kEnd, 'b'}));
  EXPECT_EQ(tiny().encode("<|end|><|end|>"), (Ids{kEnd, kEnd}));
}

TEST(TokenizerUnit, LstripAndRstripSwallowWhitespace) {
  EXPECT_EQ(tiny().encode("a  <ls>"), (Ids{'a', kLs}));
  EXPECT_EQ(tiny().encode("<rs> \n b"), (Ids{kRs, 'b'}));
  // Without the flags the whitespace stays: "a " -> a, ' '.
  EXPECT_EQ(tiny().encode("a <x>"), (Ids{'a', ' ', kX}));
}

TEST(TokenizerUnit, SingleWordTokensOnlyMatchWholeWords) {
  EXPECT_EQ(tiny().encode("a word b"), (Ids{'a', ' ', kWord, ' ', 'b'}));
  EXPECT_EQ(tiny().encode("swordfish"), (Ids{'s', 'w', 261, 'd', 'f', 'i', 's', 'h'}));  // 261 = "or"
  EXPECT_EQ(tiny().encode("(word)"), (Ids{'(', kWord, ')'}));
}

TEST(TokenizerUnit, NormalizedTokensMatchAfterNfc) {
  EXPECT_EQ(tiny().encode("caf\u00e9"), (Ids{kCafe}));
  EXPECT_EQ(tiny().encode("cafe\u0301"), (Ids{kCafe}));  // NFC first, then the token matches
  EXPECT_EQ(tiny().encode("xcafe\u0301s"), (Ids{'x', kCafe, 's'}));
}

TEST(TokenizerUnit, SpecialTokensCanBeTreatedAsText) {
  EncodeOptions as_text;
  as_text.parse_special_tokens = false;
  EXPECT_EQ(tiny().encode("<|end|>", as_text), bytes_of("<|end|>"));
  EXPECT_EQ(tiny().encode("<x>", as_text), (Ids{kX}));  // not special: still matched
}

TEST(TokenizerUnit, VocabularyQueries) {
  const Tokenizer& t = tiny();
  EXPECT_EQ(t.vocab_size(), 307);
  EXPECT_EQ(t.token_to_id("Ġworld"), kSpaceWorld);
  EXPECT_EQ(t.token_to_id("<|end|>"), kEnd);
  EXPECT_EQ(t.token_to_id("nope"), std::nullopt);
  EXPECT_EQ(t.id_to_token(kSpaceWorld), "Ġworld");
  EXPECT_EQ(t.id_to_token(' '), "Ġ");
  EXPECT_EQ(t.id_to_token(kEnd), "<|end|>");
  EXPECT_EQ(t.id_to_token(280), std::nullopt);  // a gap in the ids
  EXPECT_EQ(t.token_bytes(kSpaceWorld), " world");
  EXPECT_TRUE(t.is_special(kEnd));
  EXPECT_FALSE(t.is_special(kX));
  EXPECT_EQ(t.special_token_ids(), Ids{kEnd});
  EXPECT_EQ(t.added_tokens().size(), 7u);
  ASSERT_NE(t.added_token(kLs), nullptr);
  EXPECT_TRUE(t.added_token(kLs)->lstrip);
  EXPECT_EQ(t.eos_token_id(), kEnd);
  EXPECT_EQ(t.pad_token_id(), kX);
  EXPECT_EQ(t.bos_token_id(), std::nullopt);
}

TEST(TokenizerUnit, DecodeReplacesBrokenUtf8LikeHf) {
  const Tokenizer& t = tiny();
  EXPECT_EQ(t.decode(Ids{kHello, kSpaceWorld}), "hello world");
  EXPECT_EQ(t.decode(Ids{0xE4, 0xBD, 0xA0}), "\u4f60");
  EXPECT_EQ(t.decode(Ids{0xE4, 0xBD}), "\uFFFD");  // an unfinished character: one U+FFFD
  EXPECT_EQ(t.decode(Ids{0xE4, kEnd, 0xBD}), "\uFFFD<|end|>\uFFFD");
  DecodeOptions skip;
  skip.skip_special_tokens = true;
  EXPECT_EQ(t.decode(Ids{0xE4, kEnd, 0xBD, 0xA0}, skip), "\u4f60");
  EXPECT_EQ(t.decode(Ids{kX, kEnd}, skip), "<x>");
  EXPECT_EQ(t.decode(Ids{}), "");
}

TEST(TokenizerUnit, IncrementalDecoderNeverSplitsACharacter) {
  auto d = tiny().incremental_decoder();
  EXPECT_EQ(d.push(0xE4), "");
  EXPECT_TRUE(d.has_pending());
  EXPECT_EQ(d.push(0xBD), "");
  EXPECT_EQ(d.push(0xA0), "\u4f60");
  EXPECT_EQ(d.push(0xFF), "\uFFFD");  // can never become valid: replaced at once
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.push('A'),
            "\uFFFD"
            "A");  // the broken sequence ends, 'A' is itself
  EXPECT_EQ(d.push(0xC3), "");
  EXPECT_EQ(d.push(kEnd), "\uFFFD<|end|>");
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.finish(), "\uFFFD");
  EXPECT_FALSE(d.has_pending());
  EXPECT_EQ(d.push(Ids{kHello, kSpaceWorld}), "hello world");
  EXPECT_NE(error_of([&] { d.push(5000); }), "");
}

TEST(TokenizerUnit, LossyUtf8MatchesWhatwg) {
  // Expected outputs follow the WHATWG decoder (= Rust from_utf8_lossy).
  const std::vector<std::pair<std::string, std::string>> cases = {{"\xF0\x80\x80", "\uFFFD\uFFFD\uFFFD"},
                                                                  {"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"},
                                                                  {"\xC0\xAF", "\uFFFD\uFFFD"},
                                                                  {"\xE2\x82", "\uFFFD"},
                                                                  {"\xE2\x82"
                                                                   "A",
                                                                   "\uFFFD"
                                                                   "A"},
                                                                  {"\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
                                                                  {"a\x80"
                                                                   "b",
                                                                   "a\uFFFD"
                                                                   "b"},
                                                                  {"\xF0\x9F\x98\x80", "\U0001F600"}};
  for (const auto& [in, expected] : cases) {
    tok::LossyUtf8Decoder d;
    std::string out;
    for (char c : in) d.feed(std::string_view(&c, 1), out);  // byte by byte: same as all at once
    d.flush(out);
    EXPECT_EQ(out, expected) << "input bytes: " << in.size();
  }
}

TEST(TokenizerUnit, InvalidUtf8IsAnErrorNamingTheOffset) {
  EXPECT_EQ(find_invalid_utf8("plain ascii text, long enough for the 8-byte path"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("abc\xFF"
                              "def"),
            3u);
  EXPECT_EQ(find_invalid_utf8("\xC3"), 0u);
  EXPECT_EQ(find_invalid_utf8("ok\xE2\x82"), 2u);
  EXPECT_EQ(find_invalid_utf8("\xED\xA0\x80"), 0u);      // a surrogate
  EXPECT_EQ(find_invalid_utf8("\xC0\x80"), 0u);          // overlong
  EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("12345678\xE4\xBD\xA0\x80"), 11u);
  EXPECT_EQ(error_of([] { tiny().encode("hello \xC3(world"); }), "text: invalid UTF-8 at byte offset 6");
}

TEST(TokenizerUnit, DecodeRejectsIdsOutsideTheVocabulary) {
  for (int64_t id : {int64_t(-1), int64_t(280), int64_t(307), int64_t(1) << 40}) {
    std::string m = error_of([&] { tiny().decode(Ids{kHello, id}); });
    EXPECT_TRUE(contains(m, "token id " + std::to_string(id) + " is out of range")) << m;
  }
  EXPECT_NE(error_of([] { tiny().token_bytes(280); }), "");
}

TEST(TokenizerUnit, ByteLevelAlphabet) {
  for (int b = 0; b < 256; ++b) {
    std::string byte(1, char(b));
    EXPECT_EQ(tok::byte_level_to_bytes(tok::bytes_to_byte_level(byte)), byte);
  }
  EXPECT_EQ(tok::bytes_to_byte_level(" \n\t!~"), "ĠĊĉ!~");
  EXPECT_EQ(tok::byte_level_to_bytes("<|im_end|>"), "<|im_end|>");
  EXPECT_EQ(tok::byte_level_to_bytes("\u4f60"), std::nullopt);
}

TEST(TokenizerUnit, OnigurumaPatternsBecomeEquivalentPcre2) {
  EXPECT_EQ(tok::oniguruma_to_pcre2("(?i:'s|'t)x"), "(?:'[sS]|'[tT])x");
  EXPECT_EQ(tok::oniguruma_to_pcre2(R"(\s+(?!\S))"), R"(\p{White_Space}+(?!\P{White_Space}))");
  EXPECT_EQ(tok::oniguruma_to_pcre2(R"([^\s\p{L}\p{N}]+[\r\n]*)"), R"([^\p{White_Space}\p{L}\p{N}]+[\r\n]*)");
  EXPECT_EQ(tok::oniguruma_to_pcre2("(?i:[a-cx])"), "(?:[a-cA-CxX])");
  EXPECT_EQ(tok::oniguruma_to_pcre2(R"(\u00e9\d\h a{,3})"), R"(\x{00e9}\p{Nd}[0-9A-Fa-f] a{0,3})");
  EXPECT_EQ(tok::oniguruma_to_pcre2("(?<name>x)(?:y)(?=z)"), "(?<name>x)(?:y)(?=z)");
  EXPECT_NE(error_of([] { tok::oniguruma_to_pcre2("[a[b]]"); }), "");
  EXPECT_NE(error_of([] { tok::oniguruma_to_pcre2("[a-z&&[^b]]"); }), "");
}

std::vector<std::string> split_with(tok::SplitBehavior behavior, const std::string& text, bool invert = false) {
  tok::RegexSplitter splitter("-", behavior, invert, "test");
  std::vector<std::string> pieces;
  splitter.split(text, [&](std::string_view p) { pieces.emplace_back(p); });
  return pieces;
}

TEST(TokenizerUnit, SplitBehaviorsMatchHf) {
  using B = tok::SplitBehavior;
  using V = std::vector<std::string>;
  const std::string text = "the-final--countdown";
  EXPECT_EQ(split_with(B::kIsolated, text), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split_with(B::kRemoved, text), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split_with(B::kMergedWithPrevious, text), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split_with(B::kMergedWithNext, text), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split_with(B::kContiguous, text), (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split_with(B::kRemoved, text, /*invert=*/true), (V{"-", "-", "-"}));
}

// ---- load errors ----

std::string load_error(json tokenizer_json) {
  return error_of([&] { Tokenizer::from_json(tokenizer_json.dump()); });
}

TEST(TokenizerUnit, UnsupportedOrBrokenFilesAreRefused) {
  EXPECT_TRUE(contains(error_of([] { Tokenizer::from_json("{\"model\": [1,2"); }), "tokenizer.json: malformed JSON"));
  EXPECT_TRUE(contains(error_of([] { Tokenizer::from_json(tiny_tokenizer_json().dump(), "{oops"); }),
                       "tokenizer_config.json: malformed JSON"));

  json j = tiny_tokenizer_json();
  j["model"]["type"] = "WordPiece";
  EXPECT_TRUE(contains(load_error(j), "model type 'WordPiece' is not supported (only BPE)"));

  j = tiny_tokenizer_json();
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_TRUE(contains(load_error(j), "is not supported"));

  j = tiny_tokenizer_json();
  j["model"]["merges"].push_back(json::array({"q", "nope"}));
  EXPECT_TRUE(contains(load_error(j), "not in the vocabulary"));

  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_TRUE(contains(load_error(j), "pre_tokenizer type 'Whitespace' is not supported"));

  j = tiny_tokenizer_json();
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_TRUE(contains(load_error(j), "decoder"));

  j = tiny_tokenizer_json();
  j["model"]["vocab"] = "not an object";
  EXPECT_TRUE(contains(load_error(j), "model.vocab"));

  j = tiny_tokenizer_json();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_TRUE(contains(load_error(j), "does not compile"));

  TempDir tmp;
  EXPECT_EQ(error_of([&] { Tokenizer::load(tmp.path()); }), (tmp.path() / "tokenizer.json").string() + ": not found");
  write_file(tmp / "tokenizer.json", tiny_tokenizer_json().dump());
  write_file(tmp / "tokenizer_config.json", R"({"eos_token": "<|missing|>"})");
  EXPECT_TRUE(contains(error_of([&] { Tokenizer::load(tmp.path()); }),
                       (tmp.path() / "tokenizer_config.json").string() + ": eos_token '<|missing|>'"));
  fs::remove(tmp / "tokenizer_config.json");
  EXPECT_EQ(Tokenizer::load(tmp.path()).encode("hello"), Ids{kHello});
  EXPECT_EQ(Tokenizer::load(tmp / "tokenizer.json").encode("hello"), Ids{kHello});
}

TEST(TokenizerUnit, EncodesFromManyThreadsAtOnce) {
  const std::string text = "hello world aaaa abc <x>y caf\u00e9 \u4f60\u597d";
  const Ids expected = tiny().encode(text);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) ok[size_t(t)] += tiny().encode(text) == expected;
    });
  for (auto& th : threads) th.join();
  for (int n : ok) EXPECT_EQ(n, 500);
}

// ==== the real Qwen3 tokenizer against Hugging Face's reference ======================

fs::path assets_dir() {
  if (const char* e = std::getenv("DELTAGEN_TOKENIZER_ASSETS")) return e;
  return fs::path(DELTAGEN_SOURCE_DIR) / "third_party" / "tokenizer";
}
fs::path qwen3_dir() { return assets_dir() / "qwen3"; }
fs::path reference_module_dir() { return assets_dir() / "node_modules" / "@huggingface" / "tokenizers"; }

struct Reference {
  Ids ids;
  std::string decoded;
  bool is_nfc = true;
};

class TokenizerQwen3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(qwen3_dir() / "tokenizer.json") || !fs::exists(reference_module_dir() / "package.json")) {
      skip_reason_ = new std::string("tokenizer assets missing in " + assets_dir().string() +
                                     ": run scripts/fetch_tokenizer_assets.sh");
      return;
    }
    tokenizer_ = new Tokenizer(Tokenizer::load(qwen3_dir()));
    std::vector<std::string> added;
    for (const auto& t : tokenizer_->added_tokens()) added.push_back(t.content);
    corpus_ = new std::vector<test::CorpusDoc>(test::CorpusBuilder(added).build());
    random_ids_ = new std::vector<Ids>(random_id_lists(*tokenizer_));
    if (std::system("node --version >/dev/null 2>&1") != 0) {
      skip_reason_ = new std::string("node not found: the parity test needs Node.js");
      return;
    }
    run_reference();
  }

  // Id sequences a sampler could produce: any ids, half of them single
  // bytes, so that decoding meets broken and unfinished UTF-8.
  static std::vector<Ids> random_id_lists(const Tokenizer& t) {
    Ids byte_tokens;
    for (int b = 0; b < 256; ++b)
      byte_tokens.push_back(*t.token_to_id(tok::bytes_to_byte_level(std::string(1, char(b)))));
    test::CorpusRng rng(99);
    std::vector<Ids> lists;
    for (int round = 0; round < 60; ++round) {
      Ids ids;
      for (int k = 0; k < 300; ++k)
        ids.push_back(rng.chance(0.5) ? rng.pick(byte_tokens) : int64_t(rng.below(size_t(t.vocab_size()))));
      lists.push_back(ids);
    }
    return lists;
  }

  static void run_reference() {
    TempDir tmp;
    json corpus = json::array();
    for (const auto& d : *corpus_) corpus.push_back({{"name", d.name}, {"text", d.text}});
    for (size_t i = 0; i < random_ids_->size(); ++i)
      corpus.push_back({{"name", "random ids " + std::to_string(i)}, {"decode_ids", (*random_ids_)[i]}});
    write_file(tmp / "corpus.json", corpus.dump());
    fs::path script = fs::path(DELTAGEN_SOURCE_DIR) / "tests" / "tokenizer_reference.mjs";
    std::string cmd =
        "node " + test::shell_quote(script.string()) + " " + test::shell_quote(reference_module_dir().string()) + " " +
        test::shell_quote(qwen3_dir().string()) + " " + test::shell_quote((tmp / "corpus.json").string()) + " " +
        test::shell_quote((tmp / "out.json").string()) + " 2>" + test::shell_quote((tmp / "err.txt").string());
    if (std::system(cmd.c_str()) != 0) {
      reference_error_ = new std::string("reference tokenizer failed: " + test::read_text(tmp / "err.txt"));
      return;
    }
    json out = json::parse(test::read_text(tmp / "out.json"));
    reference_ = new std::vector<Reference>();
    reference_decoded_ = new std::vector<std::string>();
    for (const auto& r : out) {
      if (r.contains("ids"))
        reference_->push_back({r["ids"].get<Ids>(), r["decoded"].get<std::string>(), r["is_nfc"].get<bool>()});
      else
        reference_decoded_->push_back(r["decoded"].get<std::string>());
    }
  }

  void SetUp() override {
    if (skip_reason_) GTEST_SKIP() << *skip_reason_;
  }
  void require_reference() {
    ASSERT_EQ(reference_error_, nullptr) << *reference_error_;
    ASSERT_NE(reference_, nullptr);
    ASSERT_EQ(reference_->size(), corpus_->size());
    ASSERT_EQ(reference_decoded_->size(), random_ids_->size());
  }

  static size_t corpus_bytes() {
    size_t n = 0;
    for (const auto& d : *corpus_) n += d.text.size();
    return n;
  }

  // Suite-wide state, built once (loading and the node run take seconds).
  static inline const Tokenizer* tokenizer_ = nullptr;
  static inline std::vector<test::CorpusDoc>* corpus_ = nullptr;
  static inline std::vector<Ids>* random_ids_ = nullptr;
  static inline std::vector<Reference>* reference_ = nullptr;
  static inline std::vector<std::string>* reference_decoded_ = nullptr;  // of random_ids_
  static inline std::string* skip_reason_ = nullptr;
  static inline std::string* reference_error_ = nullptr;
};

TEST_F(TokenizerQwen3, KnownExample) {
  const std::string text = "Hello, my dog is cute. 你好世界! <think>x</think>";
  const Ids expected = {9707, 11, 847, 5562, 374, 18838, 13, 220, 108386, 99489, 0, 220, 151667, 87, 151668};
  EXPECT_EQ(tokenizer_->encode(text), expected);
  EXPECT_EQ(tokenizer_->decode(expected), text);
}

TEST_F(TokenizerQwen3, VocabularyAndSpecialTokens) {
  const Tokenizer& t = *tokenizer_;
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.added_tokens().size(), 26u);
  EXPECT_EQ(t.special_token_ids().size(), 14u);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(t.token_to_id("Hello"), 9707);
  EXPECT_EQ(t.id_to_token(220), "Ġ");
  EXPECT_EQ(t.id_to_token(151667), "<think>");
  EXPECT_TRUE(t.is_special(151644));
  EXPECT_FALSE(t.is_special(151667));  // <think> is added but not special
  EXPECT_EQ(t.eos_token_id(), 151645);
  EXPECT_EQ(t.pad_token_id(), 151643);
  EXPECT_EQ(t.bos_token_id(), std::nullopt);

  EncodeOptions as_text;
  as_text.parse_special_tokens = false;
  Ids ids = t.encode("<|im_start|>user<think>", as_text);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 151644), 0);
  EXPECT_EQ(ids.back(), 151667);
  EXPECT_EQ(t.decode(ids), "<|im_start|>user<think>");
}

TEST_F(TokenizerQwen3, CorpusIsLargeAndVaried) {
  EXPECT_GE(corpus_bytes(), 200u * 1000u);
  EXPECT_GE(corpus_->size(), 300u);
}

TEST_F(TokenizerQwen3, IdsMatchHuggingFaceTokenForToken) {
  require_reference();
  size_t mismatched = 0, tokens = 0;
  for (size_t i = 0; i < corpus_->size(); ++i) {
    const auto& doc = (*corpus_)[i];
    const Ids& expected = (*reference_)[i].ids;
    Ids got = tokenizer_->encode(doc.text);
    tokens += expected.size();
    if (got == expected) continue;
    ++mismatched;
    size_t at = 0;
    while (at < got.size() && at < expected.size() && got[at] == expected[at]) ++at;
    auto show = [&](const Ids& ids) {
      std::string s;
      for (size_t k = at; k < std::min(ids.size(), at + 6); ++k)
        s += std::to_string(ids[k]) + "(" + tokenizer_->id_to_token(ids[k]).value_or("?") + ") ";
      return s;
    };
    ADD_FAILURE() << doc.name << ": first difference at token " << at << " of " << expected.size()
                  << "\n  deltagen: " << show(got) << "\n  HF:       " << show(expected);
  }
  EXPECT_EQ(mismatched, 0u) << "documents with different ids";
  std::printf("[ parity   ] %zu documents, %zu bytes, %zu tokens: %zu differ\n", corpus_->size(), corpus_bytes(),
              tokens, mismatched);
}

TEST_F(TokenizerQwen3, DecodeInvertsEncode) {
  require_reference();
  for (size_t i = 0; i < corpus_->size(); ++i) {
    const auto& doc = (*corpus_)[i];
    const Reference& ref = (*reference_)[i];
    std::string round_trip = tokenizer_->decode(tokenizer_->encode(doc.text));
    // The NFC normalizer makes decode(encode(x)) == NFC(x): x itself for NFC text.
    if (ref.is_nfc) {
      EXPECT_EQ(round_trip, doc.text) << doc.name;
    }
    EXPECT_EQ(round_trip, ref.decoded) << doc.name;
  }
}

TEST_F(TokenizerQwen3, DecodeOfArbitraryIdsMatchesHuggingFace) {
  require_reference();
  for (size_t i = 0; i < random_ids_->size(); ++i)
    EXPECT_EQ(tokenizer_->decode((*random_ids_)[i]), (*reference_decoded_)[i]) << "random ids " << i;
}

// Feeds ids one at a time; every piece must be whole UTF-8 characters and the
// pieces must add up to decode(ids).
void expect_streams_like_decode(const Tokenizer& t, const Ids& ids, const std::string& what) {
  auto stream = t.incremental_decoder();
  std::string text;
  for (int64_t id : ids) {
    std::string piece = stream.push(id);
    ASSERT_TRUE(valid_utf8(piece)) << what << ": half a character after id " << id;
    text += piece;
  }
  text += stream.finish();
  EXPECT_EQ(text, t.decode(ids)) << what;
}

TEST_F(TokenizerQwen3, StreamingDecodeNeverEmitsHalfACharacter) {
  for (const auto& doc : *corpus_) expect_streams_like_decode(*tokenizer_, tokenizer_->encode(doc.text), doc.name);
  // Arbitrary id sequences too, broken UTF-8 included.
  for (size_t i = 0; i < random_ids_->size(); ++i)
    expect_streams_like_decode(*tokenizer_, (*random_ids_)[i], "random ids " + std::to_string(i));
  // A rare character comes as several byte tokens: nothing until the last one.
  const std::string rare = "\U00020001";
  Ids parts = tokenizer_->encode(rare);
  ASSERT_GT(parts.size(), 1u);
  auto stream = tokenizer_->incremental_decoder();
  for (size_t k = 0; k + 1 < parts.size(); ++k) EXPECT_EQ(stream.push(parts[k]), "");
  EXPECT_EQ(stream.push(parts.back()), rare);
}

// CPU time of this thread: unlike wall time, it does not count the time
// other processes on a busy machine take from us.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

TEST_F(TokenizerQwen3, EncodesAtLeastFiveMegabytesPerSecond) {
  std::string text;
  for (const auto& doc : *corpus_) text += doc.text + "\n";
  // A fresh tokenizer, so the first pass runs with a cold BPE cache.
  Tokenizer fresh = Tokenizer::load(qwen3_dir());
  auto mb_per_s = [&](int passes) {
    double start = thread_cpu_seconds();
    size_t n = 0;
    for (int p = 0; p < passes; ++p) n += fresh.encode(text).size();
    double s = thread_cpu_seconds() - start;
    EXPECT_GT(n, 0u);
    return double(text.size()) * passes / 1e6 / s;
  };
  double cold = mb_per_s(1), warm = mb_per_s(5);
  std::printf(
      "[ speed    ] encode, one thread, %.2f MB mixed corpus: %.1f MB/s cold cache, %.1f MB/s warm (CPU time)\n",
      double(text.size()) / 1e6, cold, warm);
#if defined(NDEBUG) && !defined(DELTAGEN_SANITIZE)  // unoptimized and sanitizer builds are allowed to be slow
  EXPECT_GE(warm, 5.0);
#endif
}

// ---- the CLI ----

TEST_F(TokenizerQwen3, CliEncodesAndDecodes) {
  const std::string dir = qwen3_dir().string();
  auto r =
      test::run_cli({"tokenize", "--tokenizer", dir, "--text", "Hello, my dog is cute. <think>x</think>", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[9707,11,847,5562,374,18838,13,220,151667,87,151668]\n");

  r = test::run_cli({"tokenize", "--tokenizer", dir, "--text", "Hello, world"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "9707 11 1879\n");

  TempDir tmp;
  const std::string text = "多语言 text\r\n\twith tabs 😀 and <|im_end|>\n";
  write_file(tmp / "in.txt", text);
  r = test::run_cli({"tokenize", "--tokenizer", dir, "--text-file", (tmp / "in.txt").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Ids ids = json::parse(r.out).get<Ids>();
  EXPECT_EQ(ids, tokenizer_->encode(text));

  std::string list;
  for (int64_t id : ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  r = test::run_cli({"tokenize", "--tokenizer", dir, "--decode", "--ids", list, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).get<std::string>(), text);
  r = test::run_cli({"tokenize", "--tokenizer", dir, "--decode", "--ids", "9707,11,1879"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello, world\n");
}

void expect_cli_error(const test::CliResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(contains(r.err, needle)) << "expected '" << needle << "' in: " << r.err;
}

// synth --tokenizer: a synthetic checkpoint with the real tokenizer, built and
// run with text in and out (the demo's path).
TEST_F(TokenizerQwen3, SynthWithTokenizerRunsTextEndToEnd) {
  TempDir tmp;
  const std::string ckpt = (tmp / "ckpt").string(), model = (tmp / "model").string();
  auto r = test::run_cli({"synth", "--preset", "tiny", "--layers", "2", "--dtype", "f32", "--tokenizer",
                          qwen3_dir().string(), "--out", ckpt});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(ckpt) / "tokenizer_config.json"));
  const json cfg = json::parse(test::read_text(fs::path(ckpt) / "config.json"));
  const json& text_cfg = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  EXPECT_EQ(text_cfg.at("vocab_size").get<int64_t>(), tokenizer_->vocab_size());
  EXPECT_EQ(tokenizer_->eos_token_id(), tokenizer_->token_to_id("<|im_end|>"));

  r = test::run_cli({"build", "--checkpoint", ckpt, "--out", model, "--context-length", "256"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::run_cli({"generate", "--model", model, "--prompt", "Hello, world", "--max-new-tokens", "6",
                     "--ignore-eos", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out.at("prompt_ids").get<Ids>(), (Ids{9707, 11, 1879}));
  const Ids generated = out.at("generated_ids").get<Ids>();
  ASSERT_EQ(generated.size(), 6u);
  EXPECT_EQ(out.at("text").get<std::string>(), tokenizer_->decode(generated));

  // No tokenizer.json in the folder: one line naming the folder, no checkpoint.
  fs::create_directories(tmp / "empty");
  r = test::run_cli({"synth", "--preset", "tiny", "--tokenizer", (tmp / "empty").string(), "--out",
                     (tmp / "ckpt2").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "tokenizer.json")) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "ckpt2"));
}

TEST_F(TokenizerQwen3, CliErrors) {
  const std::string dir = qwen3_dir().string();
  TempDir tmp;
  fs::create_directories(tmp / "empty");
  expect_cli_error(test::run_cli({"tokenize", "--tokenizer", (tmp / "empty").string(), "--text", "x"}),
                   (tmp / "empty" / "tokenizer.json").string() + ": not found");

  fs::create_directories(tmp / "bad");
  write_file(tmp / "bad" / "tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
  expect_cli_error(test::run_cli({"tokenize", "--tokenizer", (tmp / "bad").string(), "--text", "x"}),
                   "tokenizer.json: malformed JSON");

  fs::create_directories(tmp / "wordpiece");
  json j = tiny_tokenizer_json();
  j["model"]["type"] = "WordPiece";
  write_file(tmp / "wordpiece" / "tokenizer.json", j.dump());
  expect_cli_error(test::run_cli({"tokenize", "--tokenizer", (tmp / "wordpiece").string(), "--text", "x"}),
                   "model type 'WordPiece' is not supported");

  write_file(tmp / "bad.txt", std::string("good text\n\xE4\xBD") + "x");
  expect_cli_error(test::run_cli({"tokenize", "--tokenizer", dir, "--text-file", (tmp / "bad.txt").string()}),
                   (tmp / "bad.txt").string() + ": invalid UTF-8 at byte offset 10");
  expect_cli_error(test::run_cli({"tokenize", "--tokenizer", dir, "--text-file", (tmp / "none.txt").string()}),
                   "none.txt");

  expect_cli_error(test::run_cli({"tokenize", "--tokenizer", dir, "--decode", "--ids", "9707,151669"}),
                   "token id 151669 is out of range (the tokenizer has 151669 ids)");
  expect_cli_error(test::run_cli({"tokenize", "--tokenizer", dir, "--decode", "--ids", "1,x"}), "--ids");
  expect_cli_error(test::run_cli({"tokenize", "--tokenizer", dir}), "--text");
  expect_cli_error(test::run_cli({"tokenize", "--tokenizer", dir, "--text", "a", "--text-file", "b"}), "exactly one");
  expect_cli_error(test::run_cli({"tokenize", "--tokenizer", dir, "--text", "a", "--bogus", "1"}), "--bogus");
  expect_cli_error(test::run_cli({"tokenize", "--text", "a"}), "--tokenizer");
}

}  // namespace
}  // namespace deltagen
