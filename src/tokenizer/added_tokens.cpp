#include "tokenizer/added_tokens.h"

#include <algorithm>

namespace deltagen::tok {

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  const auto& c = nodes_[size_t(node)].children;
  auto it = std::lower_bound(c.begin(), c.end(), byte, [](const auto& e, unsigned char b) { return e.first < b; });
  return it != c.end() && it->first == byte ? it->second : -1;
}

void AddedTokenMatcher::add(std::string_view content, int32_t index) {
  if (content.empty()) return;
  starts_token_[static_cast<unsigned char>(content[0])] = true;
  int32_t node = 0;
  for (unsigned char byte : content) {
    int32_t next = child(node, byte);
    if (next < 0) {
      next = int32_t(nodes_.size());
      nodes_.emplace_back();
      auto& c = nodes_[size_t(node)].children;
      auto pos = std::lower_bound(c.begin(), c.end(), byte, [](const auto& e, unsigned char b) { return e.first < b; });
      c.insert(pos, {byte, next});
    }
    node = next;
  }
  if (nodes_[size_t(node)].token < 0) nodes_[size_t(node)].token = index;  // first definition wins
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::longest_at(
    std::string_view text, size_t pos, const std::function<bool(int32_t)>& allowed) const {
  std::optional<Match> best;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    int32_t token = nodes_[size_t(node)].token;
    if (token >= 0 && allowed(token)) best = Match{pos, i + 1, token};
  }
  return best;
}

std::optional<AddedTokenMatcher::Match> AddedTokenMatcher::find(std::string_view text, size_t from,
                                                                const std::function<bool(int32_t)>& allowed) const {
  if (empty()) return std::nullopt;
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t pos = from; pos < text.size(); ++pos) {
    if (!starts_token_[bytes[pos]]) continue;
    if (auto m = longest_at(text, pos, allowed)) return m;
  }
  return std::nullopt;
}

}  // namespace deltagen::tok
