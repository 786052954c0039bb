// Probing a JsonGrammar byte by byte, for the grammar and schema tests.
#pragma once
#include <cstddef>
#include <string_view>

#include "runtime/json_grammar.h"

namespace deltagen::test {

// Index of the first byte the grammar refuses, fed one at a time; npos if none.
inline size_t refused_at(JsonGrammar g, std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i)
    if (!g.accept(text.substr(i, 1))) return i;
  return std::string_view::npos;
}

}  // namespace deltagen::test
