// Generated ids -> text, piece by piece, with stop strings: the text shown
// so far never contains a stop string nor the start of one that the next
// tokens might complete (that tail is held back until it is decided).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deltagen {

class TextStream {
 public:
  // Special tokens (<|im_end|>) decode to nothing.
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);

  // Adds one generated id; returns the text that became final.
  std::string push(int64_t id);
  // Ends the stream: returns the held-back rest (nothing after a stop string).
  std::string finish();

  bool stopped() const { return stopped_; }  // a stop string appeared
  const std::string& text() const { return text_; }  // everything so far, cut before a stop string

 private:
  std::string take_final(size_t end);  // text_[shown_, end) and marks it shown
  size_t held_back() const;            // length of the longest tail that starts a stop string

  IncrementalDecoder decoder_;
  std::vector<std::string> stops_;
  size_t longest_stop_ = 0;
  std::string text_;
  size_t shown_ = 0;
  bool stopped_ = false;
};

}  // namespace deltagen
