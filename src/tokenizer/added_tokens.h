// Finds added tokens (<|im_start|>, <think>, ...) in text before BPE sees it:
// leftmost match first, the longest token at that position, as HF does.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace deltagen::tok {

class AddedTokenMatcher {
 public:
  // `index` identifies the token to the caller.
  void add(std::string_view content, int32_t index);
  bool empty() const { return nodes_.size() == 1; }

  struct Match {
    size_t begin, end;
    int32_t index;
  };
  // The leftmost match at or after `from` among tokens `allowed(index)`
  // accepts, the longest one where several start at the same position.
  std::optional<Match> find(std::string_view text, size_t from, const std::function<bool(int32_t)>& allowed) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                       // index of the token ending here
  };
  int32_t child(int32_t node, unsigned char byte) const;
  // Longest allowed token starting at text[pos], or nullopt.
  std::optional<Match> longest_at(std::string_view text, size_t pos, const std::function<bool(int32_t)>& allowed) const;

  std::vector<Node> nodes_ = std::vector<Node>(1);  // nodes_[0] is the root
  std::array<bool, 256> starts_token_{};            // first bytes of all tokens: a quick skip
};

}  // namespace deltagen::tok
