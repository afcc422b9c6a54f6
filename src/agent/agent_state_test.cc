#include "agent/agent_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "agent/testing/synthetic_agent.h"
#include "agent/testing/test_start.h"

namespace gpudoctor {
namespace {

using agent_testing::kStart;

TEST(AgentState, EmptyBeforeTheFirstSample) {
  AgentState state(kStart);
  EXPECT_EQ(state.LatestSnapshot(), nullptr);
  EXPECT_TRUE(state.OpenFindings().empty());
  AgentStatus status = state.Status();
  EXPECT_EQ(status.started_at, kStart);
  EXPECT_FALSE(status.last_sample_at.has_value());
  EXPECT_EQ(status.samples_total, 0u);
}

TEST(AgentState, CountsSamplesHangsAndXids) {
  AgentState state(kStart);
  Snapshot s = SyntheticSnapshot(4, kStart + std::chrono::seconds(5));
  s.hangs = {{.gpu_index = 1, .call = "nvmlDeviceGetPowerUsage"}};
  s.xid_events = {{.gpu_index = 2, .xid = 79, .time = kStart},
                  {.gpu_index = 2, .xid = 48, .time = kStart + std::chrono::seconds(1)}};
  state.PublishSnapshot(std::make_shared<const Snapshot>(s));
  state.RecordXid(0, 13, kStart);
  state.RecordXid(2, 31, kStart - std::chrono::seconds(30));  // older: counts, but is not the last

  AgentStatus status = state.Status();
  EXPECT_EQ(status.samples_total, 1u);
  EXPECT_EQ(status.probe_hangs_total, 1u);
  EXPECT_EQ(status.last_sample_at, kStart + std::chrono::seconds(5));
  ASSERT_EQ(status.xids.size(), 2u);
  EXPECT_EQ(status.xids[0].gpu_index, 0u);
  EXPECT_EQ(status.xids[1].gpu_index, 2u);
  EXPECT_EQ(status.xids[1].count, 3u);
  EXPECT_EQ(status.xids[1].last_xid, 48u);
  EXPECT_EQ(state.LatestSnapshot()->gpus.size(), 4u);
  state.PublishSnapshot(nullptr);  // ignored
  EXPECT_EQ(state.Status().samples_total, 1u);
}

TEST(AgentState, OpenFindingsAreSortedAndResolvedOnesDropped) {
  AgentState state(kStart);
  std::vector<StoredFinding> incidents = SyntheticIncidents(SyntheticSnapshot(8, kStart), kStart);
  std::reverse(incidents.begin(), incidents.end());
  StoredFinding resolved = incidents.front();
  resolved.key = "resolved@x";
  resolved.resolved_at = kStart;
  incidents.push_back(resolved);
  state.SetOpenFindings(incidents);
  std::vector<StoredFinding> open = state.OpenFindings();
  ASSERT_EQ(open.size(), 3u);
  EXPECT_EQ(open[0].finding.id, "row_remap_pending");
  EXPECT_EQ(open[1].finding.id, "gpu_idle_while_peers_busy");
  EXPECT_EQ(open[2].finding.id, "temperature_high");
  state.SetOpenFindings({});
  EXPECT_TRUE(state.OpenFindings().empty());
}

TEST(AgentState, StoreHealthAndAGenerationThatMovesWithEveryChange) {
  AgentState state(kStart);
  EXPECT_FALSE(state.Status().store.has_value());  // no history kept
  const uint64_t start = state.Status().generation;
  state.SetStoreHealth({.ok = false, .errors_total = 1, .last_error = "database or disk is full"});
  const AgentStatus failing = state.Status();
  ASSERT_TRUE(failing.store.has_value());
  EXPECT_FALSE(failing.store->ok);
  EXPECT_GT(failing.generation, start);
  state.SetStoreHealth(*failing.store);  // the same again: nothing changed
  EXPECT_EQ(state.Status().generation, failing.generation);
  state.PublishSnapshot(std::make_shared<Snapshot>(SyntheticSnapshot(1, kStart)));
  EXPECT_GT(state.Status().generation, failing.generation);
}

TEST(AgentState, ReadersSeeWholeSnapshotsWhileTheWriterPublishes) {
  AgentState state(kStart);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) {
      state.PublishSnapshot(std::make_shared<const Snapshot>(SyntheticSnapshot(1 + i % 8, kStart)));
      state.SetOpenFindings(SyntheticIncidents(SyntheticSnapshot(8, kStart), kStart));
    }
  });
  for (int i = 0; i < 2000; ++i) {
    std::shared_ptr<const Snapshot> s = state.LatestSnapshot();
    if (s) {
      ASSERT_EQ(s->device_count.value(), s->gpus.size());
    }
    (void)state.OpenFindings();
    (void)state.Status();
  }
  stop = true;
  writer.join();
}

}  // namespace
}  // namespace gpudoctor
