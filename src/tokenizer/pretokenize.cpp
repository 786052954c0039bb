#include "tokenizer/pretokenize.h"

#include <cctype>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

#include "tokenizer/utf8.h"
#include "deltagen/error.h"

namespace deltagen::tok {
namespace {

// ---- Oniguruma -> PCRE2 ---------------------------------------------------------

// Oniguruma's Unicode \w, written the way HF's JS port spells it.
constexpr const char* kWordChars = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
constexpr const char* kHexDigits = "0-9A-Fa-f";

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char other_case(char c) { return c >= 'a' && c <= 'z' ? char(c - 32) : char(c + 32); }

class PatternTranslator {
 public:
  explicit PatternTranslator(std::string_view p) : p_(p) {}

  std::string run() {
    while (i_ < p_.size()) {
      char c = p_[i_];
      if (c == '\\')
        escape_outside_class();
      else if (c == '[')
        character_class();
      else if (c == '(')
        open_group();
      else if (c == ')')
        close_group();
      else if (c == '{')
        brace();
      else if (fold_ && is_ascii_letter(c)) {
        out_ += std::string("[") + c + other_case(c) + "]";
        ++i_;
      } else {
        copy_char();
      }
    }
    return out_;
  }

 private:
  [[noreturn]] void unsupported(const std::string& what) const {
    fail("pre_tokenizer regex", what + " at offset " + std::to_string(i_) + " is not supported");
  }

  bool at(std::string_view s) const { return p_.substr(i_, s.size()) == s; }

  // Copies one whole (possibly multi-byte) character.
  void copy_char() {
    size_t n = std::min(utf8_sequence_length(static_cast<unsigned char>(p_[i_])), p_.size() - i_);
    out_.append(p_.substr(i_, n));
    i_ += n;
  }

  // \p{..}, \x{..}: copied with their braces. Returns false if not braced.
  bool braced_escape() {
    char kind = p_[i_ + 1];
    if ((kind != 'p' && kind != 'P' && kind != 'x') || i_ + 2 >= p_.size() || p_[i_ + 2] != '{') return false;
    size_t close = p_.find('}', i_);
    if (close == std::string_view::npos) unsupported("unterminated \\" + std::string(1, kind) + "{");
    out_.append(p_.substr(i_, close + 1 - i_));
    i_ = close + 1;
    return true;
  }

  // Escapes that mean the same character inside and outside classes.
  bool simple_escape(char next) {
    if (next == 'v')
      out_ += "\\x{0B}";  // PCRE2's \v is a class (vertical space)
    else if (next == 'a')
      out_ += "\\x{07}";
    else if (next == 'e')
      out_ += "\\x{1B}";
    else if (next == 'u') {
      if (i_ + 6 > p_.size()) unsupported("short \\u escape");
      out_ += "\\x{" + std::string(p_.substr(i_ + 2, 4)) + "}";
      i_ += 6;
      return true;
    } else {
      return false;
    }
    i_ += 2;
    return true;
  }

  void escape_outside_class() {
    if (i_ + 1 >= p_.size()) unsupported("trailing backslash");
    if (braced_escape()) return;
    char next = p_[i_ + 1];
    if (simple_escape(next)) return;
    const char* replacement = nullptr;
    switch (next) {
      case 's':
        replacement = "\\p{White_Space}";
        break;
      case 'S':
        replacement = "\\P{White_Space}";
        break;
      case 'd':
        replacement = "\\p{Nd}";
        break;
      case 'D':
        replacement = "\\P{Nd}";
        break;
      case 'h':
        replacement = "[0-9A-Fa-f]";
        break;
      case 'H':
        replacement = "[^0-9A-Fa-f]";
        break;
      default:
        break;
    }
    if (replacement) {
      out_ += replacement;
      i_ += 2;
    } else if (next == 'w' || next == 'W') {
      out_ += std::string(next == 'w' ? "[" : "[^") + kWordChars + "]";
      i_ += 2;
    } else {
      out_ += '\\';
      ++i_;
      copy_char();  // \n, \., \b, \A, ...: same meaning in PCRE2
    }
  }

  void escape_inside_class() {
    if (i_ + 1 >= p_.size()) unsupported("trailing backslash");
    if (braced_escape()) return;
    char next = p_[i_ + 1];
    if (simple_escape(next)) return;
    switch (next) {
      case 's':
        out_ += "\\p{White_Space}";
        break;
      case 'S':
        out_ += "\\P{White_Space}";
        break;
      case 'd':
        out_ += "\\p{Nd}";
        break;
      case 'D':
        out_ += "\\P{Nd}";
        break;
      case 'w':
        out_ += kWordChars;
        break;
      case 'h':
        out_ += kHexDigits;
        break;
      case 'W':
      case 'H':
        unsupported("\\W or \\H inside a character class");
      default:
        out_ += '\\';
        ++i_;
        copy_char();
        return;
    }
    i_ += 2;
  }

  void character_class() {
    out_ += '[';
    ++i_;
    if (i_ < p_.size() && p_[i_] == '^') {
      out_ += '^';
      ++i_;
    }
    if (i_ < p_.size() && p_[i_] == ']') {  // a leading ']' is a literal
      out_ += "\\]";
      ++i_;
    }
    while (i_ < p_.size() && p_[i_] != ']') {
      char c = p_[i_];
      if (c == '\\') {
        escape_inside_class();
      } else if (at("[:")) {
        size_t close = p_.find(":]", i_);
        if (close == std::string_view::npos) unsupported("unterminated POSIX class");
        out_.append(p_.substr(i_, close + 2 - i_));
        i_ = close + 2;
      } else if (c == '[') {
        unsupported("a nested character class");
      } else if (at("&&")) {
        unsupported("character class intersection (&&)");
      } else if (fold_ && is_ascii_letter(c)) {
        class_letter_or_range();
      } else {
        copy_char();
      }
    }
    if (i_ >= p_.size()) unsupported("unterminated character class");
    out_ += ']';
    ++i_;
  }

  // Inside (?i:[...]): a letter also matches its other case; so does a
  // range of letters of one case (a-z also adds A-Z).
  void class_letter_or_range() {
    char first = p_[i_];
    bool range = i_ + 2 < p_.size() && p_[i_ + 1] == '-' && p_[i_ + 2] != ']';
    if (!range) {
      out_ += first;
      out_ += other_case(first);
      ++i_;
      return;
    }
    char last = p_[i_ + 2];
    out_.append(p_.substr(i_, 3));
    bool same_case = is_ascii_letter(last) && (first >= 'a') == (last >= 'a');
    if (same_case) {
      out_ += other_case(first);
      out_ += '-';
      out_ += other_case(last);
    }
    i_ += 3;
  }

  void open_group() {
    fold_stack_.push_back(fold_);
    if (at("(?i:") || at("(?-i:")) {
      fold_ = p_[i_ + 2] == 'i';
      out_ += "(?:";
      i_ += at("(?i:") ? 4 : 5;
      return;
    }
    for (std::string_view prefix : {"(?<=", "(?<!", "(?:", "(?=", "(?!", "(?>"}) {
      if (at(prefix)) {
        out_ += prefix;
        i_ += prefix.size();
        return;
      }
    }
    if (at("(?<") || at("(?P<")) {  // named group: copy the name untouched
      size_t close = p_.find('>', i_);
      if (close == std::string_view::npos) unsupported("unterminated group name");
      out_.append(p_.substr(i_, close + 1 - i_));
      i_ = close + 1;
      return;
    }
    if (at("(?")) unsupported("this group syntax");
    out_ += '(';
    ++i_;
  }

  void close_group() {
    if (!fold_stack_.empty()) {
      fold_ = fold_stack_.back();
      fold_stack_.pop_back();
    }
    out_ += ')';
    ++i_;
  }

  void brace() {
    if (at("{,")) {  // Oniguruma's {,n} is {0,n}
      out_ += "{0,";
      i_ += 2;
    } else {
      out_ += '{';
      ++i_;
    }
  }

  std::string_view p_;
  size_t i_ = 0;
  std::string out_;
  bool fold_ = false;
  std::vector<bool> fold_stack_;
};

// GPT-2's pattern, used by a ByteLevel pre-tokenizer with use_regex = true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string escape_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x80 && !std::isalnum(static_cast<unsigned char>(c))) out += '\\';
    out += c;
  }
  return out;
}

SplitBehavior parse_behavior(const std::string& name, const std::string& where) {
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  fail(where, "pre_tokenizer Split behavior '" + name + "' is not supported");
}

// Per-thread PCRE2 match state, so one tokenizer can encode on many threads.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~MatchScratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchScratch& match_scratch() {
  thread_local MatchScratch scratch;
  return scratch;
}

}  // namespace

std::string oniguruma_to_pcre2(std::string_view pattern) { return PatternTranslator(pattern).run(); }

// ---- RegexSplitter --------------------------------------------------------------

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::string& pattern, SplitBehavior behavior, bool invert, const std::string& where)
    : compiled_(std::make_unique<Compiled>()), behavior_(behavior), invert_(invert), where_(where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_compile_context* ctx = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(ctx, PCRE2_NEWLINE_LF);  // '.', '^' and '$' treat only \n as a line end, as Oniguruma does
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, ctx);
  pcre2_compile_context_free(ctx);
  if (!compiled_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    fail(where, "pre_tokenizer regex does not compile (" + std::string(reinterpret_cast<char*>(message)) +
                    " at offset " + std::to_string(offset) + "): " + pattern);
  }
  // JIT is an optimization: without it (unsupported CPU) pcre2_match interprets.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::for_each_segment(std::string_view text,
                                     const std::function<void(size_t, size_t, bool)>& on_segment) const {
  MatchScratch& scratch = match_scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap_start = 0, search_from = 0;
  while (search_from < text.size()) {
    // The text was validated once up front; checking it again per match would
    // make splitting quadratic.
    int rc = pcre2_match(compiled_->code, subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, scratch.data,
                         scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      fail(where_, "pre_tokenizer regex failed: " + std::string(reinterpret_cast<char*>(message)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
    size_t begin = ovector[0], end = ovector[1];
    if (begin == end) {  // empty matches split nothing; retry one character later
      search_from = begin + utf8_sequence_length(static_cast<unsigned char>(text[begin]));
      continue;
    }
    if (begin > gap_start) on_segment(gap_start, begin, false);
    on_segment(begin, end, true);
    gap_start = search_from = end;
  }
  if (gap_start < text.size()) on_segment(gap_start, text.size(), false);
}

void RegexSplitter::split(std::string_view text, const PieceSink& emit) const {
  auto piece = [&](size_t b, size_t e) {
    if (e > b) emit(text.substr(b, e - b));
  };
  size_t pending = 0;             // start of text not emitted yet (merging behaviors)
  bool pending_is_delim = false;  // Contiguous: whether [pending, here) is a run of delimiters
  for_each_segment(text, [&](size_t b, size_t e, bool matched) {
    bool delim = matched != invert_;
    switch (behavior_) {
      case SplitBehavior::kIsolated:
        piece(b, e);
        break;
      case SplitBehavior::kRemoved:
        if (!delim) piece(b, e);
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (delim) {
          piece(pending, e);
          pending = e;
        }
        break;
      case SplitBehavior::kMergedWithNext:
        if (delim) {
          piece(pending, b);
          pending = b;
        }
        break;
      case SplitBehavior::kContiguous:
        if (!delim || !pending_is_delim) {
          piece(pending, b);
          pending = b;
        }
        pending_is_delim = delim;
        break;
    }
  });
  bool merging = behavior_ != SplitBehavior::kIsolated && behavior_ != SplitBehavior::kRemoved;
  if (merging) piece(pending, text.size());
}

// ---- PreTokenizer ---------------------------------------------------------------

PreTokenizer PreTokenizer::from_json(const nlohmann::json& config, const std::string& where) {
  PreTokenizer p;
  p.add_steps(config, where);
  return p;
}

void PreTokenizer::add_steps(const nlohmann::json& config, const std::string& where) {
  if (config.is_null()) return;
  if (!config.is_object() || !config.contains("type")) fail(where, "pre_tokenizer: expected an object with a \"type\"");
  std::string type = config.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& step : config.at("pretokenizers")) add_steps(step, where);
  } else if (type == "Split") {
    const auto& pattern = config.at("pattern");
    std::string pcre2;
    if (pattern.contains("Regex"))
      pcre2 = oniguruma_to_pcre2(pattern.at("Regex").get<std::string>());
    else if (pattern.contains("String"))
      pcre2 = escape_literal(pattern.at("String").get<std::string>());
    else
      fail(where, "pre_tokenizer Split: pattern needs \"Regex\" or \"String\"");
    SplitBehavior behavior = parse_behavior(config.value("behavior", std::string("Isolated")), where);
    steps_.push_back({std::make_shared<RegexSplitter>(pcre2, behavior, config.value("invert", false), where), false});
  } else if (type == "ByteLevel") {
    Step step;
    step.add_prefix_space = config.value("add_prefix_space", false);
    if (config.value("use_regex", true))
      step.regex =
          std::make_shared<RegexSplitter>(oniguruma_to_pcre2(kGpt2Pattern), SplitBehavior::kIsolated, false, where);
    steps_.push_back(std::move(step));
    byte_level_ = true;
  } else {
    fail(where, "pre_tokenizer type '" + type + "' is not supported (supported: Sequence, Split, ByteLevel)");
  }
}

void PreTokenizer::split(std::string_view text, const PieceSink& emit) const {
  if (text.empty()) return;
  run_steps(0, text, emit);
}

void PreTokenizer::run_steps(size_t first_step, std::string_view text, const PieceSink& emit) const {
  if (first_step == steps_.size()) {
    emit(text);
    return;
  }
  const Step& step = steps_[first_step];
  std::string prefixed;
  if (step.add_prefix_space && text.front() != ' ') {
    prefixed.reserve(text.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(text);
    text = prefixed;
  }
  if (!step.regex) {
    run_steps(first_step + 1, text, emit);
    return;
  }
  step.regex->split(text, [&](std::string_view piece) { run_steps(first_step + 1, piece, emit); });
}

}  // namespace deltagen::tok
