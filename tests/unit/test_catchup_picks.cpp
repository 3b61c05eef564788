// Many senders' catch-up picks (group_catchup.h): sender 0 pairs each joiner with a member that
// holds the committed version and needs the same boxes, and the word the other senders read from
// its store is refused when it is cut, longer, or pairs what it may not.
#include <gtest/gtest.h>

#include <cstring>

#include "common/error.h"
#include "group/group_catchup.h"

using namespace wsync;

namespace {

// Ranks 1..6; 2 and 5 join. Needs: odd ranks TP rank 0's boxes, even ones TP rank 1's. Ranks 1 and
// 6 hold version 3, rank 4 holds version 2 only, rank 3 holds nothing (it left, or a catch-up from
// it failed).
bool tp_same(uint32_t a, uint32_t b) { return a % 2 == b % 2; }

}  // namespace

TEST(CatchupPicks, EachJoinerGetsAHolderWithItsBoxesLowestRankFirstOneJoinerPerSource) {
  const std::vector<uint64_t> holds = {3, 0, 0, 2, 0, 3};
  CatchupPicks p = catchup_pick(holds, 3, 7, {2, 5}, {1, 2, 3, 4, 5, 6}, tp_same);
  EXPECT_EQ(p.version, 3u);
  EXPECT_EQ(p.seq, 7u);
  ASSERT_EQ(p.pairs.size(), 2u);
  EXPECT_EQ(p.pairs[0], std::make_pair(2u, 6u));  // (rank 4 holds version 2 only)
  EXPECT_EQ(p.pairs[1], std::make_pair(5u, 1u));
  // Rank 1 is the only TP-0 holder: a second TP-0 joiner gets none.
  p = catchup_pick(holds, 3, 7, {5, 7}, {1, 2, 3, 4, 5, 6, 7}, tp_same);
  ASSERT_EQ(p.pairs.size(), 1u);
  EXPECT_EQ(p.pairs[0], std::make_pair(5u, 1u));
  // A joiner is no source, even one that says it holds the version (a restarted process).
  EXPECT_TRUE(catchup_pick({3, 3, 0, 3, 0, 0}, 3, 7, {2, 4}, {1, 2, 3, 4, 5, 6}, tp_same).pairs.empty());
  // Nothing committed: no pair; a member outside the update's ranks is no source.
  EXPECT_TRUE(catchup_pick(holds, 0, 7, {2}, {1, 2, 3}, tp_same).pairs.empty());
  EXPECT_TRUE(catchup_pick(holds, 3, 7, {2}, {2, 4}, tp_same).pairs.empty());
}

TEST(CatchupPicks, TheWordRoundTripsAndEveryBadOneIsRefused) {
  CatchupPicks p;
  p.version = 9;
  p.seq = 41;
  p.pairs = {{2, 6}, {5, 1}};
  const std::vector<uint8_t> word = encode_picks(p);
  CatchupPicks out;
  ASSERT_EQ(decode_picks(6, word, {2, 5}, &out), WSYNC_OK) << last_error();
  EXPECT_EQ(out.version, 9u);
  EXPECT_EQ(out.seq, 41u);
  EXPECT_EQ(out.pairs, p.pairs);
  for (size_t n = 0; n < word.size(); ++n)
    EXPECT_EQ(decode_picks(6, std::vector<uint8_t>(word.begin(), word.begin() + static_cast<long>(n)), {2, 5}, &out),
              WSYNC_ERR_PROTOCOL) << "cut to " << n;
  std::vector<uint8_t> longer = word;
  longer.push_back(0);
  EXPECT_EQ(decode_picks(6, longer, {2, 5}, &out), WSYNC_ERR_PROTOCOL);
  const auto refused = [&](std::vector<std::pair<uint32_t, uint32_t>> pairs, const char* why) {
    CatchupPicks bad = p;
    bad.pairs = std::move(pairs);
    EXPECT_EQ(decode_picks(6, encode_picks(bad), {2, 5}, &out), WSYNC_ERR_PROTOCOL) << why;
    EXPECT_NE(last_error().find("catch-up picks"), std::string::npos) << last_error();
  };
  refused({{3, 1}}, "a joiner not of this batch");
  refused({{2, 1}, {2, 6}}, "a joiner twice");
  refused({{2, 5}}, "a source that is a joiner");
  refused({{2, 7}}, "a source past the receivers");
  refused({{2, 0}}, "source rank 0");
  refused({{2, 1}, {5, 3}, {2, 4}}, "more pairs than joiners");
}
