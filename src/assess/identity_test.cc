#include "assess/identity.h"

#include <gtest/gtest.h>

#include "common/scratch_dir.h"
#include "health/health_test_support.h"
#include "store/snapshot_samples.h"
#include "store/sqlite_store.h"

namespace gpudoctor {
namespace {

using testing_support::HealthySnapshot;
using testing_support::kNow;
using testing_support::XidLogEvent;

TEST(IdentityMemory, AGpuThatStopsAnsweringIsWhatItWasLastSeenAs) {
  Snapshot before = HealthySnapshot(2);
  before.taken_at = kNow;
  IdentityMemory memory;
  memory.Observe(before);
  Snapshot after = HealthySnapshot(2);
  after.gpus[1].MarkUnreadable(AccessError::kGpuLost, "GPU is lost");
  memory.Observe(after);  // nothing to remember of a GPU that does not answer
  memory.Recall(after);
  ASSERT_TRUE(after.gpus[1].last_known.has_value());
  EXPECT_EQ(after.gpus[1].last_known->uuid, before.gpus[1].uuid.value());
  EXPECT_EQ(after.gpus[1].last_known->serial, before.gpus[1].serial.value());
  EXPECT_EQ(after.gpus[1].last_known->pci_bus_id, before.gpus[1].pci_bus_id.value());
  EXPECT_EQ(after.gpus[1].last_known->seen_at, kNow);
  EXPECT_FALSE(after.gpus[0].last_known.has_value()) << "a GPU that answers needs no memory";
}

// The agent's history keeps each GPU's identity; a one-shot command names a
// lost GPU from it even when the agent saw the loss before this run.
TEST(RecallIdentities, FromTheAgentsHistory) {
  testing::ScratchDir dir;
  const std::string path = dir.File("history.db");
  const Snapshot healthy = HealthySnapshot(2);
  {
    auto store = SqliteHistoryStore::Open(path, {}, kNow);
    ASSERT_TRUE(store.ok()) << store.error().message;
    std::vector<GpuSample> samples;
    for (const GpuSnapshot& gpu : healthy.gpus) samples.push_back(SampleFromGpu(gpu, healthy));
    ASSERT_TRUE((*store)->Append(samples, {}).ok());
  }
  Snapshot now = HealthySnapshot(2);
  now.gpus[0].MarkUnreadable(AccessError::kGpuLost, "GPU is lost");
  RecallIdentities(now, {.history_database = path, .now = kNow});
  ASSERT_TRUE(now.gpus[0].last_known.has_value());
  EXPECT_EQ(now.gpus[0].last_known->serial, healthy.gpus[0].serial.value());
  EXPECT_EQ(now.gpus[0].last_known->pci_bus_id, healthy.gpus[0].pci_bus_id.value());
  EXPECT_EQ(now.gpus[0].last_known->name, healthy.gpus[0].name.value());
  EXPECT_EQ(now.gpus[0].last_known->source, "the agent's history");
}

// Without a history, the kernel log names the address: one GPU without an
// address and one address no GPU answers at are the same card.
TEST(RecallIdentities, TheKernelLogNamesTheAddressOfTheOneLostGpu) {
  Snapshot now = HealthySnapshot(4);
  const std::string bus = now.gpus[2].pci_bus_id.value();
  now.gpus[2].MarkUnreadable(AccessError::kGpuLost, "GPU is lost");
  const std::vector<LogEvent> events = {XidLogEvent(79, bus, EventSeverity::kCritical, kNow),
                                        XidLogEvent(13, now.gpus[0].pci_bus_id.value(), EventSeverity::kWarning, kNow)};
  RecallIdentities(now, {.log_events = &events, .now = kNow});
  ASSERT_TRUE(now.gpus[2].last_known.has_value());
  EXPECT_EQ(now.gpus[2].last_known->pci_bus_id, bus);
  EXPECT_EQ(now.gpus[2].last_known->source, "the kernel log");

  // Two lost GPUs and one address: no guess.
  Snapshot two = HealthySnapshot(4);
  two.gpus[1].MarkUnreadable(AccessError::kGpuLost, "GPU is lost");
  two.gpus[2].MarkUnreadable(AccessError::kGpuLost, "GPU is lost");
  RecallIdentities(two, {.log_events = &events, .now = kNow});
  EXPECT_FALSE(two.gpus[1].last_known.has_value());
  EXPECT_FALSE(two.gpus[2].last_known.has_value());
}

}  // namespace
}  // namespace gpudoctor
