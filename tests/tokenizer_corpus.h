// The tokenizer parity corpus: the hand-written documents in
// tests/data/tokenizer/*.txt plus generated ones that aim at the places where
// a tokenizer can go wrong: special tokens in and around text, near misses,
// non-NFC input, CRLF and long whitespace runs, digits, contractions, emoji
// sequences, and random mixtures of all of these.
//
// Deterministic (fixed seed, own PRNG). Only characters assigned before
// Unicode 14 are generated: PCRE2, ICU and Node ship different Unicode
// versions and disagree about newer characters.
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace deltagen::test {

struct CorpusDoc {
  std::string name;
  std::string text;
};

inline std::string utf8_of(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// SplitMix64: tiny, and the same numbers everywhere (std distributions are not).
class CorpusRng {
 public:
  explicit CorpusRng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return size_t(next() % n); }
  bool chance(double p) { return double(next() >> 11) / double(1ull << 53) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }
  char32_t in_range(std::pair<char32_t, char32_t> r) { return r.first + char32_t(below(r.second - r.first + 1)); }

 private:
  uint64_t state_;
};

class CorpusBuilder {
 public:
  explicit CorpusBuilder(std::vector<std::string> added_tokens) : added_(std::move(added_tokens)) {}

  std::vector<CorpusDoc> build() {
    add_files();
    add_special_token_docs();
    add_chat_docs();
    add_non_nfc_docs();
    add_whitespace_docs();
    add_number_docs();
    add_contraction_docs();
    add_long_run_docs();
    add_random_docs(320);
    return std::move(docs_);
  }

 private:
  void add(std::string name, std::string text) { docs_.push_back({std::move(name), std::move(text)}); }

  void add_files() {
    auto dir = std::filesystem::path(DELTAGEN_SOURCE_DIR) / "tests" / "data" / "tokenizer";
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".txt") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::string text = read_text(f);
      add("file:" + f.filename().string(), text);
      // Every word of the hand-written text feeds the random documents.
      std::string word;
      for (char c : text + " ") {
        if (c == ' ' || c == '\n' || c == '\t') {
          if (!word.empty()) words_.push_back(word);
          word.clear();
        } else {
          word += c;
        }
      }
    }
  }

  // Near misses of a token: what must not be matched as the token.
  static std::vector<std::string> near_misses(const std::string& t) {
    std::vector<std::string> v = {t.substr(0, t.size() - 1), t.substr(1), t.substr(1, t.size() - 2),
                                  t.substr(0, t.size() / 2) + " " + t.substr(t.size() / 2)};
    std::string upper = t;
    for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
    v.push_back(upper);
    v.push_back("<" + t + ">");
    v.push_back(t.substr(0, t.size() - 1) + t);  // a token right after its own prefix
    return v;
  }

  void add_special_token_docs() {
    for (size_t i = 0; i < added_.size(); ++i) {
      const std::string& t = added_[i];
      const std::string& other = added_[(i + 7) % added_.size()];
      std::string doc = t + "\n" + "Before" + t + "after. " + " " + t + " " + "\n" + t + "\n" + t + t + t + " x" + t +
                        "y " + "\t" + t + "\t" + "\r\n" + t + "\r\n" + "你好" + t + "世界 " + "123" + t + "456 " + t +
                        other + " " + other + t + " \"" + t + "\" '" + t + "' (" + t + ")";
      for (const auto& m : near_misses(t)) doc += " | " + m + " |" + m + "|" + m + t;
      add("special:" + t, doc);
    }
    std::string all;
    for (const auto& t : added_) all += t;
    add("special:all-adjacent", all + "\n" + all + " " + all);
    add("special:near-misses",
        "<|im_start <|im_start| <|im_start|| <||im_start|> |im_start|> <|im_end|>> <<|im_end|> "
        "<|im_start|im_end|> <think </think <think/> </ think> <THINK> <tool_call </tool_call "
        "<|endoftext| <|endoftext||> <|fim_prefix <|fim_pad||> <|vision_start|<|vision_end|> "
        "<|<|im_start|>|> < |im_start| > <\\|im_start\\|> &lt;|im_start|&gt;");
  }

  void add_chat_docs() {
    const std::vector<std::string> questions = {
        "What's the capital of France?",     "写一首关于秋天的短诗。",  "Explain BPE in two sentences.",
        "¿Cuál es la raíz cuadrada de 144?", "Привет! Как дела?",       "Fix this:\n```python\nprint('hi'\n```",
        "Translate to Arabic: good morning", "2 + 2 = ?\n\n\nThanks!!!"};
    const std::vector<std::string> answers = {"Paris.",
                                              "秋风起，落叶黄。",
                                              "BPE merges the most frequent pairs.\nRepeat until done.",
                                              "12",
                                              "Всё хорошо, спасибо!",
                                              "```python\nprint('hi')\n```",
                                              "صباح الخير",
                                              "4 😊"};
    for (size_t i = 0; i < questions.size(); ++i) {
      std::string doc = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n" +
                        questions[i] + "<|im_end|>\n<|im_start|>assistant\n<think>\nThe user asks: " + questions[i] +
                        "\nLet me think step by step.\n</think>\n\n" + answers[i] + "<|im_end|>\n";
      if (i % 2 == 0)
        doc +=
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
            "\"unit\": \"celsius\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": 21.5, "
            "\"sky\": \"clear\"}\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
      add("chat:" + std::to_string(i), doc);
    }
    add("chat:fim",
        "<|repo_name|>deltagen\n<|file_sep|>src/util.py\n<|fim_prefix|>def area(r):\n    <|fim_suffix|>\n"
        "    return a<|fim_middle|>a = 3.14159 * r ** 2<|fim_pad|><|fim_pad|><|endoftext|>");
    add("chat:vision",
        "<|vision_start|><|image_pad|><|image_pad|><|image_pad|><|vision_end|>Describe the image."
        "<|vision_start|><|video_pad|><|vision_end|><|object_ref_start|>the red car<|object_ref_end|>"
        "<|box_start|>(12,34),(56,78)<|box_end|><|quad_start|>(1,2),(3,4),(5,6),(7,8)<|quad_end|>"
        "<|vision_pad|>");
  }

  void add_non_nfc_docs() {
    std::string doc;
    // Decomposed Latin, Vietnamese, Greek; marks out of canonical order; stacked marks.
    doc +=
        "Cafe\u0301 nai\u0308ve re\u0301sume\u0301 A\u030Angstro\u0308m n\u0303 Ph\u1EDF pho\u031B\u0309 "
        "Vie\u0323\u0302t Nam \u03B1\u0301\u03B9\u0308 q\u0307\u0323 q\u0323\u0307 s\u0323\u0307 "
        "a\u0328\u0301 o\u031B\u0300\u0323 e\u0301\u0301\u0301 x\u0300\u0301\u0302\u0303\u0304\u0305 ";
    // Canonical singletons: Kelvin, Angstrom, Ohm sign, Greek question mark and ano teleia, CJK compatibility.
    doc += "300\u212A 5\u212B 10\u2126 why\u037E \u0387 \uF900\uF901\uFA10 \u2000\u2001 \u1FEF ";
    // Hangul conjoining jamo that compose to syllables; a lone mark at the start of a section.
    doc += "\u1100\u1161\u11A8 \u1112\u1161\u11AB\u1100\u1173\u11AF \u110B\u1175 \u0301start <|im_end|>\u0301after ";
    // Composition exclusions: these stay decomposed.
    doc += "\u0915\u093C \u0928\u093C \u05E9\u05C1 \u0FB2\u0F80 \u00E9\u0301 ";
    add("nfc:mixed", doc);
    CorpusRng rng(7);
    const std::vector<std::pair<char32_t, char32_t>> marks = {{0x300, 0x36F},   {0x591, 0x5BD},   {0x64B, 0x652},
                                                              {0x20D0, 0x20F0}, {0x1DC0, 0x1DF9}, {0xFE20, 0xFE2F}};
    const std::vector<std::pair<char32_t, char32_t>> bases = {
        {'a', 'z'}, {'A', 'Z'}, {0xC0, 0xFF}, {0x391, 0x3C9}, {0x410, 0x44F}, {0x5D0, 0x5EA}, {0x627, 0x64A}};
    for (int d = 0; d < 6; ++d) {
      std::string s;
      while (s.size() < 2500) {
        s += utf8_of(rng.in_range(rng.pick(bases)));
        for (size_t k = rng.below(4); k > 0; --k) s += utf8_of(rng.in_range(rng.pick(marks)));
        if (rng.chance(0.15)) s += rng.chance(0.5) ? " " : "\n";
      }
      add("nfc:random" + std::to_string(d), s);
    }
  }

  void add_whitespace_docs() {
    std::string doc;
    for (int n : {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 257}) {
      doc +=
          "x" + std::string(size_t(n), ' ') + "y" + std::string(size_t(n), '\t') + "z" + std::string(size_t(n), '\n');
      doc += std::string(size_t(n), ' ') + "\n" + std::string(size_t(n), ' ') + "w ";
    }
    add("ws:runs", doc);
    add("ws:crlf",
        "line one\r\nline two\r\n\r\n  indented\r\n\tTabbed\r\n\r\n\r\nend \r\n \r\n\rlone CR\rx\n\r\n\n"
        "trailing spaces   \r\n   leading\r\n");
    add("ws:unicode",
        "a\u00A0b\u00A0\u00A0c \u3000全角\u3000\u3000空白 d\u2003e\u2002f\u2009g\u200Ah\u202Fi\u205Fj"
        " k\xC2\x85"
        "l\u2028m\u2029n o\u200Bp\u200Cq\u200Dr \uFEFFs\uFEFF t\vu\fv \u1680w \u180Ex"
        " \u00A0 \u00A0\n\u3000\n \xC2\x85"
        " \n\u2028\u2029  end\u00A0"
        // U+180E is no longer whitespace (Unicode 6.3), though PCRE2's \s still matches it.
        "\n\u180E\u180E\u180E\n \u180E. x\u180E\n\u180E \u180E\u180E  \u180E");
    add("ws:only", "   \n\n\t\t  \r\n   ");
    add("ws:leading-trailing", "\n\n\n   Hello   \n\n\n");
    std::string code;
    for (int depth = 0; depth < 12; ++depth)
      code += std::string(size_t(depth) * 4, ' ') + "if (x" + std::to_string(depth) + ") {\n" +
              std::string(size_t(depth), '\t') + "// tab-indented comment\n";
    add("ws:indented-code", code);
  }

  void add_number_docs() {
    CorpusRng rng(11);
    std::string doc =
        "0 1 12 123 1234 12345 123456 1234567 1,234,567 1.234.567,89 3.14159 -2.5e-10 6.022e23 0x1F "
        "0b1011 0o777 1_000_000 007 2024-05-17 12:34:56 +1 (555) 010-9999 v1.2.3 ٠١٢٣٤٥٦٧٨٩ ۱۲۳ "
        "०१२३४५६७८९ ১২৩ ๑๒๓ １２３４５ ½ ¼ ¾ ⅓ ² ³ ¹ ₁₂₃ Ⅻ ⅻ ⑴ ① ㉑ 𝟎𝟏𝟐 ";
    for (int i = 0; i < 300; ++i) {
      size_t len = 1 + rng.below(i % 10 == 0 ? 60 : 12);
      for (size_t k = 0; k < len; ++k) doc += char('0' + rng.below(10));
      doc += rng.pick(std::vector<std::string>{" ", ".", ",", "\n", "-", "x", "%", " + ", "km", "元"});
    }
    add("numbers", doc);
  }

  void add_contraction_docs() {
    std::string doc;
    for (std::string c : {"s", "t", "re", "ve", "m", "ll", "d"}) {
      std::string upper = c;
      for (char& ch : upper) ch = char(std::toupper(static_cast<unsigned char>(ch)));
      std::string mixed = c;
      mixed[0] = char(std::toupper(static_cast<unsigned char>(mixed[0])));
      for (const auto& form : {c, upper, mixed}) {
        doc += "it'" + form + " IT'" + form + " '" + form + " ''" + form + " '" + form + form + " x'" + form + "y 9'" +
               form + " \u2019" + form + " it\u2019" + form + " ";
      }
    }
    doc += "'\u017F '\u017Ft it'\u017F \u212A'S 'K 'k 'sss 'lll 'dd 're've'll 'S'T'M ''' ' s '\n's";
    add("contractions", doc);
  }

  void add_long_run_docs() {
    std::string letters(4000, 'a');
    add("long:letters", letters + " " + std::string(3000, 'z') + "q" + " " + std::string(500, 'A') + "b");
    std::string han;
    CorpusRng rng(13);
    for (int i = 0; i < 1500; ++i) han += utf8_of(rng.in_range({0x4E00, 0x9FA5}));
    add("long:han", han);
    add("long:digits", std::string(2000, '7') + " " + std::string(777, '0'));
    add("long:spaces", std::string(5000, ' ') + "x" + std::string(3000, '\n') + "y" + std::string(2000, '\t'));
    add("long:punct", std::string(3000, '!') + std::string(1000, '=') + "->" + std::string(1000, '.'));
    std::string emoji;
    for (int i = 0; i < 400; ++i) emoji += "😀👍🏽👨‍👩‍👧‍👦";
    add("long:emoji", emoji);
  }

  // ---- random documents ----

  std::string random_atom(CorpusRng& rng) {
    static const std::vector<std::pair<char32_t, char32_t>> scripts = {
        {0x21, 0x7E},     {0xA1, 0xFF},       {0x100, 0x17F},     {0x391, 0x3C9},     {0x400, 0x4FF},
        {0x5D0, 0x5EA},   {0x621, 0x64A},     {0x905, 0x939},     {0xE01, 0xE30},     {0x3041, 0x3096},
        {0x30A1, 0x30FA}, {0x4E00, 0x9FA5},   {0xAC00, 0xD7A3},   {0x2190, 0x21FF},   {0x2500, 0x257F},
        {0x2600, 0x26FF}, {0x1F300, 0x1F5FF}, {0x1F600, 0x1F64F}, {0x20000, 0x2A6D6}, {0x1D400, 0x1D4FF},
        {0xE000, 0xE0FF}, {0xFF01, 0xFF5E},   {0x300, 0x36F},     {0x1100, 0x1112},   {0x1161, 0x1175}};
    static const std::vector<std::string> emoji = {"👨‍👩‍👧‍👦",
                                                   "👩🏽‍💻",
                                                   "👍🏿",
                                                   "🏳️‍🌈",
                                                   "🇯🇵",
                                                   "🇫🇷",
                                                   "❤️",
                                                   "✌🏻",
                                                   "1️⃣",
                                                   "🧑🏾‍🤝‍🧑🏻",
                                                   "😂",
                                                   "🙈🙉🙊",
                                                   "🏴󠁧󠁢󠁥󠁮󠁧󠁿",
                                                   "👁️‍🗨️"};
    static const std::vector<std::string> whitespace = {
        " ",      " ",      " ",        "  ",     "   ",    "\t",     "\n", "\n\n", "\r\n", " \n",  "\n ",
        "\u00A0", "\u3000", "\xC2\x85", "\u2028", "\uFEFF", "\u200B", "\v", "\f",   "\r",   "    ", "\t\t"};
    static const std::vector<std::string> punct = {
        "{",   "}",  "();", "->", "::",  "==", "!=", "&&", "||", "/*",       "*/",   "//",   "#",
        "@",   "$",  "%",   "^",  "...", "—",  "–",  "“",  "”",  "‘",        "’",    "«",    "»",
        "。",  "、", "！",  "？", "<",   ">",  "</", "/>", "<|", "|>",       "'",    "\"",   "`",
        "```", "\\", "\\n", "=>", "?.",  "??", "**", "~",  "_",  "__init__", "\x01", "\x7F", std::string(1, '\0')};
    static const std::vector<std::string> contractions = {"'s", "'t", "'re", "'ve", "'m",  "'ll",
                                                          "'d", "'S", "'LL", "n't", "'Re", "’s"};
    size_t kind = rng.below(100);
    if (kind < 30) return rng.pick(words_);
    if (kind < 45) return rng.pick(whitespace);
    if (kind < 55) return rng.pick(punct);
    if (kind < 62) return rng.pick(contractions);
    if (kind < 68) return rng.pick(emoji);
    if (kind < 75) {
      std::string digits;
      for (size_t k = 1 + rng.below(8); k > 0; --k) digits += char('0' + rng.below(10));
      return digits;
    }
    if (kind < 77) return rng.pick(added_);
    std::string run;
    auto range = rng.pick(scripts);
    for (size_t k = 1 + rng.below(6); k > 0; --k) run += utf8_of(rng.in_range(range));
    return run;
  }

  void add_random_docs(int count) {
    CorpusRng rng(2024);
    for (int d = 0; d < count; ++d) {
      size_t target = 200 + rng.below(1200);
      std::string doc;
      while (doc.size() < target) doc += random_atom(rng);
      add("random:" + std::to_string(d), doc);
    }
  }

  std::vector<std::string> added_;
  std::vector<std::string> words_;
  std::vector<CorpusDoc> docs_;
};

}  // namespace deltagen::test
