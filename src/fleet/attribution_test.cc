#include "fleet/attribution.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

using std::chrono::hours;
const WallTime kStart = WallTime{std::chrono::seconds(1'800'000'000)};
WallTime At(int hour) { return kStart + hours(hour); }

SlotKey Slot(const std::string& host, const std::string& bus = "0000:17:00.0") {
  return {.hostname = host, .pci_bus_id = bus, .slot_name = ""};
}
Placement Stay(const std::string& serial, SlotKey slot, int from, int to) {
  return {.serial = serial, .slot = std::move(slot), .from = At(from), .to = At(to), .model = "H100"};
}
ErrorEpisode Xid(SlotKey slot, int hour, double count = 1) {
  return {.slot = std::move(slot), .time = At(hour), .kind = ErrorKind::kXid, .count = count};
}

TEST(Attribution, ErrorsThatFollowTheSerialBlameTheCard) {
  // Card A erred in host-1, was swapped with B into host-2 and erred there too; B is clean in host-1.
  std::vector<Placement> placements = {Stay("A", Slot("host-1"), 0, 10), Stay("B", Slot("host-2"), 0, 10),
                                       Stay("A", Slot("host-2"), 11, 60), Stay("B", Slot("host-1"), 11, 60)};
  std::vector<ErrorEpisode> episodes = {Xid(Slot("host-1"), 5, 3), Xid(Slot("host-2"), 30, 2)};
  std::vector<Verdict> verdicts = AttributeErrors(placements, episodes, At(60));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].blame, Blame::kCard);
  EXPECT_EQ(verdicts[0].serial, "A");
  EXPECT_EQ(verdicts[0].slot, Slot("host-2"));  // where it erred last
  EXPECT_GE(verdicts[0].confidence, 0.8);
  EXPECT_THAT(verdicts[0].evidence, ::testing::Contains(::testing::HasSubstr("A in host-1 0000:17:00.0: 3 xid")));
  EXPECT_THAT(verdicts[0].evidence, ::testing::Contains(::testing::HasSubstr("A in host-2 0000:17:00.0: 2 xid")));
}

TEST(Attribution, ErrorsThatStayInTheSlotBlameTheSlot) {
  std::vector<Placement> placements = {Stay("A", Slot("host-1"), 0, 10), Stay("B", Slot("host-2"), 0, 10),
                                       Stay("A", Slot("host-2"), 11, 60), Stay("B", Slot("host-1"), 11, 60)};
  std::vector<ErrorEpisode> episodes = {Xid(Slot("host-1"), 5), Xid(Slot("host-1"), 40)};
  std::vector<Verdict> verdicts = AttributeErrors(placements, episodes, At(60));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].blame, Blame::kSlot);
  EXPECT_EQ(verdicts[0].slot, Slot("host-1"));
  EXPECT_EQ(verdicts[0].serial, "B");  // the last card that erred there
  EXPECT_EQ(verdicts[0].evidence.size(), 2u);
}

TEST(Attribution, ACardThatNeverMovedGetsASwapProposalWithAGoodCardOfTheSameModel) {
  std::vector<Placement> placements = {Stay("A", Slot("host-1"), 0, 60), Stay("B", Slot("host-1", "0000:3b:00.0"), 0, 60),
                                       Stay("C", Slot("host-2"), 0, 60), Stay("D", Slot("host-3"), 0, 60)};
  placements[3].model = "A100";
  std::vector<ErrorEpisode> episodes = {Xid(Slot("host-1"), 5)};
  std::vector<Verdict> verdicts = AttributeErrors(placements, episodes, At(60));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].blame, Blame::kUndetermined);
  ASSERT_TRUE(verdicts[0].proposal);
  EXPECT_EQ(verdicts[0].proposal->serial, "A");
  EXPECT_EQ(verdicts[0].proposal->partner, "C");  // another host, same model
  EXPECT_EQ(verdicts[0].proposal->to, Slot("host-2"));
  EXPECT_THAT(verdicts[0].summary, ::testing::HasSubstr("swap A with the good card C"));
}

TEST(Attribution, ASwapTooRecentToJudgeIsPending) {
  std::vector<Placement> placements = {Stay("A", Slot("host-1"), 0, 10), Stay("A", Slot("host-2"), 11, 20),
                                       Stay("B", Slot("host-1"), 11, 20)};
  std::vector<Verdict> verdicts = AttributeErrors(placements, {Xid(Slot("host-1"), 5)}, At(20));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_TRUE(verdicts[0].swap_pending);
  EXPECT_EQ(verdicts[0].blame, Blame::kUndetermined);
  EXPECT_THAT(verdicts[0].summary, ::testing::HasSubstr("swap under way"));
}

TEST(Attribution, ACardCleanElsewhereForLongEnoughPointsToTheSlot) {
  std::vector<Placement> placements = {Stay("A", Slot("host-1"), 0, 10), Stay("A", Slot("host-2"), 11, 60)};
  std::vector<Verdict> verdicts = AttributeErrors(placements, {Xid(Slot("host-1"), 5)}, At(60));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].blame, Blame::kSlot);
  EXPECT_EQ(verdicts[0].slot, Slot("host-1"));
  EXPECT_THAT(verdicts[0].summary, ::testing::HasSubstr("put a known good card there"));
}

TEST(Attribution, BothCleanAfterTheMoveBlamesNeither) {
  std::vector<Placement> placements = {Stay("A", Slot("host-1"), 0, 10), Stay("A", Slot("host-2"), 11, 60),
                                       Stay("B", Slot("host-1"), 11, 60)};
  std::vector<Verdict> verdicts = AttributeErrors(placements, {Xid(Slot("host-1"), 5)}, At(60));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].blame, Blame::kUndetermined);
  EXPECT_FALSE(verdicts[0].swap_pending);
  EXPECT_THAT(verdicts[0].summary, ::testing::HasSubstr("reseating may have fixed it"));
}

TEST(Attribution, ABadCardDoesNotMakeItsSlotsLookBad) {
  // A erred in host-1 and host-2; B erred once in host-2 too: A is a card, host-2 has one other erring card only.
  std::vector<Placement> placements = {Stay("A", Slot("host-1"), 0, 10), Stay("A", Slot("host-2"), 11, 20),
                                       Stay("B", Slot("host-2"), 21, 60), Stay("C", Slot("host-3"), 0, 60)};
  std::vector<ErrorEpisode> episodes = {Xid(Slot("host-1"), 5), Xid(Slot("host-2"), 15), Xid(Slot("host-2"), 50)};
  std::vector<Verdict> verdicts = AttributeErrors(placements, episodes, At(60));
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_EQ(verdicts[0].blame, Blame::kCard);
  EXPECT_EQ(verdicts[0].serial, "A");
  EXPECT_EQ(verdicts[1].serial, "B");
  EXPECT_EQ(verdicts[1].blame, Blame::kUndetermined);
}

TEST(Attribution, ErrorsWithNoKnownCardAreReportedNotDropped) {
  std::vector<Verdict> verdicts = AttributeErrors({}, {Xid(Slot("host-9"), 1)}, At(2));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].serial, "");
  EXPECT_THAT(verdicts[0].summary, ::testing::HasSubstr("never reported"));
}

TEST(Attribution, AnErrorJustBeforeASwapBelongsToTheCardThatWasThere) {
  // A erred at 10:00 and left at 10:00 + 35 s; B arrived in its slot a step later.
  std::vector<Placement> placements = {Stay("A", Slot("host-1"), 0, 10), Stay("B", Slot("host-1"), 10, 60)};
  placements[0].to += std::chrono::seconds(35);
  placements[1].from += std::chrono::seconds(50);
  placements.push_back(Stay("A", Slot("host-2"), 11, 60));
  std::vector<ErrorEpisode> episodes = {Xid(Slot("host-1"), 10), Xid(Slot("host-2"), 30)};
  std::vector<Verdict> verdicts = AttributeErrors(placements, episodes, At(60));
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].blame, Blame::kCard);
  EXPECT_EQ(verdicts[0].serial, "A");
}

TEST(Attribution, NoErrorsNoVerdicts) {
  EXPECT_TRUE(AttributeErrors({Stay("A", Slot("host-1"), 0, 10)}, {}, At(10)).empty());
}

}  // namespace
}  // namespace gpudoctor
