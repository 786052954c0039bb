// Prompt-lookup drafting (src/speculative/ngram_draft.h).
#include <gtest/gtest.h>

#include <vector>

#include "speculative/ngram_draft.h"

namespace deltagen {
namespace {

using Ids = std::vector<int64_t>;

TEST(NgramDraft, DraftsWhatFollowedTheLastOccurrenceOfTheSuffix) {
  //                 0  1  2  3  4  5  6  7  8  9
  const Ids tokens = {1, 2, 3, 4, 5, 9, 9, 2, 3, 4};
  EXPECT_EQ(ngram_draft(tokens, 3), (Ids{5, 9, 9}));  // "2 3 4" at 1..3, then 5 9 9
  EXPECT_EQ(ngram_draft(tokens, 1), (Ids{5}));
  EXPECT_EQ(ngram_draft(tokens, 0), Ids{});
}

TEST(NgramDraft, TheLongestMatchWinsThenTheLatest) {
  // "6 7 8" occurred at 0 (then 1); the later "7 8" at 5 (then 2) is shorter.
  const Ids longest = {6, 7, 8, 1, 0, 7, 8, 2, 6, 7, 8};
  EXPECT_EQ(ngram_draft(longest, 1), (Ids{1}));
  EXPECT_EQ(ngram_draft(longest, 1, {.max_ngram = 2, .min_ngram = 2}), (Ids{2}));
  // Only 2-grams: the latest occurrence of "7 8" (at 4, then 2) wins over the first (then 1).
  const Ids latest = {7, 8, 1, 5, 7, 8, 2, 0, 7, 8};
  EXPECT_EQ(ngram_draft(latest, 1, {.max_ngram = 2, .min_ngram = 2}), (Ids{2}));
}

TEST(NgramDraft, NoMatchOrTooShortGivesNothing) {
  EXPECT_EQ(ngram_draft(Ids{1, 2, 3, 4, 5}, 4), Ids{});
  EXPECT_EQ(ngram_draft(Ids{}, 4), Ids{});
  EXPECT_EQ(ngram_draft(Ids{3}, 4), Ids{});
  // A 1-gram match counts only when min_ngram allows it.
  EXPECT_EQ(ngram_draft(Ids{5, 6, 1, 5}, 2), Ids{});
  EXPECT_EQ(ngram_draft(Ids{5, 6, 1, 5}, 2, {.max_ngram = 4, .min_ngram = 1}), (Ids{6, 1}));
}

TEST(NgramDraft, ARepeatingPatternContinuesIntoTheSuffix) {
  // "1 2 1 2 1 2": the suffix "1 2 1 2" occurred at 0; what follows it runs to the end.
  EXPECT_EQ(ngram_draft(Ids{1, 2, 1, 2, 1, 2}, 8), (Ids{1, 2}));
  // A draft never reads past the tokens it was given.
  EXPECT_EQ(ngram_draft(Ids{4, 4, 4}, 8, {.max_ngram = 2, .min_ngram = 2}), (Ids{4}));
}

}  // namespace
}  // namespace deltagen
