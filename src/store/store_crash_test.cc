// kill -9 at random moments never corrupts the history nor loses a finding
// that UpsertFindings had returned (and so could have been alerted on).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <set>
#include <thread>

#include "store/sqlite_store.h"
#include "store/test_support.h"

namespace gpudoctor {
namespace {

using namespace std::chrono_literals;

// The child: writes like the agent, as fast as it can, until killed. After
// each UpsertFindings returns it reports the opened incident ids on `report_fd`.
[[noreturn]] void RunWriter(const std::string& path, int round, int report_fd) {
  auto store = SqliteHistoryStore::Open(path, {});
  if (!store) _exit(3);
  WallTime now = testing::T0() + round * 100'000s;
  for (int iteration = 0;; ++iteration, now += 5s) {
    std::vector<GpuSample> samples;
    std::vector<ProcessMemorySample> processes;
    for (uint32_t gpu = 0; gpu < 8; ++gpu) {
      samples.push_back(testing::Sample(now, gpu, 40 + iteration % 30, iteration % 100));
      processes.push_back({now, gpu, samples.back().uuid, 1000 + gpu, "train", uint64_t{1} << 30});
    }
    if (!(*store)->Append(samples, processes)) _exit(4);
    // A different GPU each time: the last incident resolves, a new one opens.
    const std::vector<Finding> findings = {testing::MakeFinding("crash_probe", iteration % 8)};
    auto transitions = (*store)->UpsertFindings(findings, now);
    if (!transitions) _exit(5);
    for (const FindingTransition& transition : *transitions) {
      if (transition.kind != FindingTransition::Kind::kOpened) continue;
      const int64_t id = transition.incident.incident_id;
      if (write(report_fd, &id, sizeof id) != sizeof id) _exit(6);
    }
    if (iteration % 12 == 0 && !(*store)->Maintain(now)) _exit(7);
  }
}

std::vector<int64_t> ReadReports(int fd) {
  std::vector<int64_t> ids;
  int64_t id = 0;
  // Writes of 8 bytes to a pipe are atomic, so a report is whole or absent.
  while (read(fd, &id, sizeof id) == sizeof id) ids.push_back(id);
  return ids;
}

TEST(StoreCrash, KillNineLosesNoReportedFinding) {
  testing::ScratchDir dir;
  const std::string path = dir.File("history.db");
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> delay_ms(0, 250);

  std::vector<int64_t> reported;
  for (int round = 0; round < 6; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(fds[0]);
      RunWriter(path, round, fds[1]);
    }
    close(fds[1]);
    // Wait for the first report so the child is surely mid-work, then kill it at a random moment.
    int64_t first = 0;
    ASSERT_EQ(read(fds[0], &first, sizeof first), static_cast<ssize_t>(sizeof first));
    reported.push_back(first);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(random)));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "writer failed, status " << status;
    std::vector<int64_t> more = ReadReports(fds[0]);
    close(fds[0]);
    reported.insert(reported.end(), more.begin(), more.end());

    auto store = SqliteHistoryStore::Open(path, {});
    ASSERT_TRUE(store.ok()) << store.error().message;
    auto integrity = (*store)->IntegrityCheck();
    ASSERT_TRUE(integrity.ok());
    ASSERT_EQ(*integrity, "ok") << "after round " << round;
    auto stored = (*store)->QueryFindings({.from = WallTime{}, .until = testing::T0() + 10'000'000s});
    ASSERT_TRUE(stored.ok());
    std::set<int64_t> present;
    for (const StoredFinding& incident : *stored) present.insert(incident.incident_id);
    for (int64_t id : reported) ASSERT_TRUE(present.contains(id)) << "incident " << id << " lost in round " << round;
  }
  EXPECT_GT(reported.size(), 6u);
}

}  // namespace
}  // namespace gpudoctor
