#include "trace_alloc/trace_records.h"

#include <gtest/gtest.h>

#include <cstring>

namespace gpudoctor {
namespace {

using namespace trace_wire;

void Clear(Slot& slot) { std::memset(static_cast<void*>(&slot), 0, sizeof slot); }

TEST(DecodeSlot, ReadsAnAllocation) {
  Slot slot;
  Clear(slot);
  slot.type = static_cast<uint8_t>(RecordType::kAlloc);
  slot.api = static_cast<uint8_t>(Api::kCudaMallocManaged);
  slot.aux = static_cast<uint16_t>(Kind::kManaged);
  slot.pid = 42;
  slot.event.address = 0xabc;
  slot.event.bytes = 4096;
  slot.event.site = 7;
  auto record = DecodeSlot(slot);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->type, RecordType::kAlloc);
  EXPECT_EQ(record->kind, Kind::kManaged);
  EXPECT_EQ(record->pid, 42u);
  EXPECT_EQ(record->bytes, 4096u);
  EXPECT_EQ(record->site, 7u);
  EXPECT_STREQ(ApiName(slot.api), "cudaMallocManaged");
}

TEST(DecodeSlot, RefusesWhatIsNoRecord) {
  Slot slot;
  Clear(slot);
  EXPECT_FALSE(DecodeSlot(slot)) << "empty";
  slot.type = 200;
  EXPECT_FALSE(DecodeSlot(slot)) << "unknown type";
  slot.type = static_cast<uint8_t>(RecordType::kAlloc);
  slot.api = 1;
  slot.aux = 9;
  EXPECT_FALSE(DecodeSlot(slot)) << "unknown kind";
  slot.aux = 0;
  EXPECT_FALSE(DecodeSlot(slot)) << "an allocation of no kind";
  slot.type = static_cast<uint8_t>(RecordType::kFree);
  slot.api = static_cast<uint8_t>(Api::kCount);
  EXPECT_FALSE(DecodeSlot(slot)) << "unknown entry point";
  slot.type = static_cast<uint8_t>(RecordType::kText);
  slot.piece.length = kTextBytes + 1;
  EXPECT_FALSE(DecodeSlot(slot)) << "text longer than its slot";
  slot.piece.length = 3;
  std::memcpy(slot.piece.text, "abc", 3);
  auto text = DecodeSlot(slot);
  ASSERT_TRUE(text);
  EXPECT_EQ(text->text, "abc");
  slot.type = static_cast<uint8_t>(RecordType::kFrame);
  slot.api = 0;
  slot.aux = kMaxFrames;
  EXPECT_FALSE(DecodeSlot(slot)) << "frame number beyond the deepest stack";
  EXPECT_STREQ(ApiName(250), "?");
}

}  // namespace
}  // namespace gpudoctor
