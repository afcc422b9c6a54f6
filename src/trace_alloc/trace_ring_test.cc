#include "trace_alloc/trace_ring.h"

#include <sys/mman.h>

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace gpudoctor {
namespace {

using namespace trace_wire;

// The program's view of the ring: its own mapping of the memfd, which it
// may write as it likes.
class ProgramSide {
 public:
  explicit ProgramSide(const TraceRing& ring, uint64_t capacity) : bytes_(RingBytes(capacity)), capacity_(capacity) {
    memory_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, ring.fd(), 0);
    EXPECT_NE(memory_, MAP_FAILED);
  }
  ~ProgramSide() { munmap(memory_, bytes_); }
  RingHeader* header() { return static_cast<RingHeader*>(memory_); }
  char* bytes() { return static_cast<char*>(memory_); }
  size_t size() const { return bytes_; }

  // Publishes one allocation record as the library does.
  void Allocate(uint64_t address, uint64_t bytes) {
    const uint64_t position = header()->head.fetch_add(1);
    Slot& slot = Slots(header())[position & (capacity_ - 1)];
    ASSERT_EQ(slot.sequence.load(), position) << "the test never fills the ring";
    slot.type = static_cast<uint8_t>(RecordType::kAlloc);
    slot.api = static_cast<uint8_t>(Api::kCudaMalloc);
    slot.aux = static_cast<uint16_t>(Kind::kDevice);
    slot.pid = 42;
    slot.event = {.time_ns = 1, .address = address, .bytes = bytes, .site = 1, .result = 0, .extra = 0};
    slot.sequence.store(position + 1);
  }
  // Takes a position and never fills it, as a process killed inside a hook.
  void TakeAndDie() { header()->head.fetch_add(1); }

 private:
  void* memory_;
  size_t bytes_;
  uint64_t capacity_;
};

std::vector<TraceRecord> DrainAll(TraceRing& ring) {
  std::vector<TraceRecord> records;
  ring.Drain([&](const TraceRecord& r) { records.push_back(r); });
  return records;
}

TEST(TraceRing, ReadsWhatIsPublishedInOrder) {
  auto ring = TraceRing::Create(8);
  ASSERT_TRUE(ring.ok());
  ProgramSide program(**ring, 8);
  for (uint64_t i = 1; i <= 20; ++i) {
    program.Allocate(0x1000 * i, i);
    std::vector<TraceRecord> records = DrainAll(**ring);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].address, 0x1000 * i);
  }
  EXPECT_FALSE((*ring)->corrupt());
  ASSERT_TRUE((*ring)->counters().has_value());
}

TEST(TraceRing, AWritePositionFarAheadIsCorruptionNotAnEndlessRead) {
  auto ring = TraceRing::Create(8, /*max_waiting_writers=*/4);
  ASSERT_TRUE(ring.ok());
  ProgramSide program(**ring, 8);
  program.Allocate(0x1000, 1);
  program.header()->head.store(uint64_t{1} << 62);
  EXPECT_EQ(DrainAll(**ring).size(), 0u);
  EXPECT_TRUE((*ring)->corrupt());
  EXPECT_NE((*ring)->corruption().find("write position 4611686018427387904 is"), std::string::npos)
      << (*ring)->corruption();
  EXPECT_EQ((*ring)->DrainRemaining([](const TraceRecord&) {}, 1'000'000'000), 0u) << "returns at once";
  EXPECT_FALSE((*ring)->counters().has_value());
  EXPECT_EQ(program.header()->abandoned.load(), 1u) << "writers are told to stop waiting";
}

TEST(TraceRing, AWritePositionBehindTheReaderIsCorruption) {
  auto ring = TraceRing::Create(8);
  ASSERT_TRUE(ring.ok());
  ProgramSide program(**ring, 8);
  for (int i = 0; i < 3; ++i) program.Allocate(0x1000 + i, 1);
  EXPECT_EQ(DrainAll(**ring).size(), 3u);
  program.header()->head.store(1);
  EXPECT_EQ(DrainAll(**ring).size(), 0u);
  EXPECT_NE((*ring)->corruption().find("went back behind the reader's 3"), std::string::npos)
      << (*ring)->corruption();
}

TEST(TraceRing, AnOverwrittenHeaderIsCorruption) {
  auto ring = TraceRing::Create(8);
  ASSERT_TRUE(ring.ok());
  ProgramSide program(**ring, 8);
  program.header()->capacity = 1 << 20;
  EXPECT_EQ(DrainAll(**ring).size(), 0u);
  EXPECT_NE((*ring)->corruption().find("header was overwritten"), std::string::npos) << (*ring)->corruption();
}

TEST(TraceRing, NothingAtOrPastTheWritePositionIsARecord) {
  auto ring = TraceRing::Create(8);
  ASSERT_TRUE(ring.ok());
  ProgramSide program(**ring, 8);
  // A forged slot that says "published" where no position was taken.
  Slot& forged = Slots(program.header())[0];
  forged.type = static_cast<uint8_t>(RecordType::kDetach);
  forged.sequence.store(1);
  EXPECT_EQ(DrainAll(**ring).size(), 0u);
  EXPECT_FALSE((*ring)->corrupt());
}

TEST(TraceRing, HolesLeftByDeadWritersAreSkippedAfterTheGraceOnce) {
  auto ring = TraceRing::Create(8);
  ASSERT_TRUE(ring.ok());
  ProgramSide program(**ring, 8);
  program.Allocate(0x1000, 1);
  program.TakeAndDie();
  program.TakeAndDie();
  program.Allocate(0x2000, 2);
  std::vector<TraceRecord> records;
  const uint64_t start = MonotonicNowNs();
  (*ring)->DrainRemaining([&](const TraceRecord& r) { records.push_back(r); }, 50'000'000);
  EXPECT_LT(MonotonicNowNs() - start, 1'000'000'000u);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].address, 0x2000u);
  EXPECT_EQ((*ring)->skipped(), 2u);
}

TEST(TraceRing, AnInterruptCutsTheLastReadShort) {
  auto ring = TraceRing::Create(8);
  ASSERT_TRUE(ring.ok());
  ProgramSide program(**ring, 8);
  program.TakeAndDie();
  const uint64_t start = MonotonicNowNs();
  (*ring)->DrainRemaining([](const TraceRecord&) {}, 60'000'000'000, [] { return true; });
  EXPECT_LT(MonotonicNowNs() - start, 1'000'000'000u) << "did not wait out the 60 s grace";
}

TEST(TraceRing, CountersThatCannotBeTrueAreNotBelieved) {
  auto ring = TraceRing::Create(8);
  ASSERT_TRUE(ring.ok());
  ProgramSide program(**ring, 8);
  program.Allocate(0x1000, 1);
  program.header()->records_dropped.store(~uint64_t{0});
  EXPECT_FALSE((*ring)->counters().has_value());
  program.header()->records_dropped.store(1);
  ASSERT_TRUE((*ring)->counters().has_value());
  EXPECT_EQ((*ring)->counters()->records_dropped, 1u);
}

TEST(TraceRing, RandomBytesOverEverythingEndEveryRead) {
  auto ring = TraceRing::Create(16, 64);
  ASSERT_TRUE(ring.ok());
  ProgramSide program(**ring, 16);
  uint64_t state = 88172645463325252ull;
  for (int round = 0; round < 200; ++round) {
    for (size_t i = 0; i < program.size(); ++i) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      program.bytes()[i] = static_cast<char>(state);
    }
    (void)DrainAll(**ring);
    (*ring)->DrainRemaining([](const TraceRecord&) {}, 0);
    (void)(*ring)->counters();
  }
  EXPECT_TRUE((*ring)->corrupt());
}

}  // namespace
}  // namespace gpudoctor
