#include "runtime/text_stream.h"

#include <algorithm>
#include <string_view>

#include "deltagen/error.h"

namespace deltagen {

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : decoder_(tokenizer.incremental_decoder(DecodeOptions{.skip_special_tokens = true})),
      stops_(std::move(stop_strings)) {
  for (const std::string& s : stops_) {
    if (s.empty()) fail("stop string", "must not be empty");
    longest_stop_ = std::max(longest_stop_, s.size());
  }
}

std::string TextStream::take_final(size_t end) {
  std::string piece = text_.substr(shown_, end - shown_);
  shown_ = end;
  return piece;
}

size_t TextStream::held_back() const {
  const std::string_view text(text_);
  const size_t max_tail = std::min(text.size() - shown_, longest_stop_ - 1);
  for (size_t tail = max_tail; tail > 0; --tail) {
    const std::string_view suffix = text.substr(text.size() - tail);
    for (const std::string& s : stops_)
      if (s.size() > tail && std::string_view(s).substr(0, tail) == suffix) return tail;
  }
  return 0;
}

std::string TextStream::push(int64_t id) {
  if (stopped_) return {};
  const size_t before = text_.size();
  try {
    text_ += decoder_.push(id);
  } catch (const Error&) {
    // Models pad their vocabulary beyond the tokenizer's; such an id (unlikely
    // but possible when sampling) has no text. The decoder is unchanged.
    return {};
  }
  if (stops_.empty()) return take_final(text_.size());

  // A stop string can only end in the new text, so it starts at most
  // longest_stop_ - 1 bytes before it.
  const size_t search_from = before >= longest_stop_ ? before - (longest_stop_ - 1) : 0;
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, text_.find(s, search_from));
  if (first != std::string::npos) {
    stopped_ = true;
    text_.resize(first);
    return take_final(std::max(first, shown_));
  }
  return take_final(text_.size() - held_back());
}

std::string TextStream::finish() {
  if (stopped_) return {};
  text_ += decoder_.finish();
  return take_final(text_.size());
}

}  // namespace deltagen
