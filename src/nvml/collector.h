// Collecting a Snapshot from NVML without ever hanging.
//
// NVML calls run in a separate probe process (this binary re-executed with
// the hidden `__probe` command), because a thread stuck in an uninterruptible
// ioctl can never be cancelled. The parent waits for each GPU's answer until
// a deadline; a GPU that misses it is reported as a ProbeHang naming the NVML
// call it was inside, and is not probed again while that old probe process is
// still alive. Everything else carries on.
//
//   CollectorOptions options;
//   options.probe_executable = "/proc/self/exe";
//   NvmlCollector collector(options);
//   Snapshot snapshot = collector.Collect();
//   collector.CollectInto(snapshot);  // the next one, in the same memory
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "model/snapshot.h"

namespace gpudoctor {

struct CollectorOptions {
  std::string library_path;       // empty: libnvidia-ml.so.1 ($GPUDOCTOR_NVML_LIB is applied by the CLI)
  std::string scenario_path;      // non-empty: fake NVML scenario (sets GPUDOCTOR_SCENARIO for the probe)
  std::string probe_executable;   // the gpudoctor binary to re-execute as the probe
  Duration deadline = std::chrono::seconds(10);
  // How long to wait for NVML Xid events in each snapshot (0: do not listen).
  Duration event_window = std::chrono::milliseconds(0);
  const Clock* clock = &SystemClock::Instance();
};

// Anything that produces snapshots: live NVML, captured nvidia-smi output, a
// fixed snapshot in tests.
class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;
  virtual Snapshot Collect() = 0;
  // The same, into `snapshot`, replacing everything it held. A source may
  // reuse the memory of the GPUs it held (their strings and lists), so a
  // caller that refills one snapshot, like the agent, allocates almost nothing.
  virtual void CollectInto(Snapshot& snapshot) { snapshot = Collect(); }
};

class NvmlCollector final : public SnapshotSource {
 public:
  explicit NvmlCollector(CollectorOptions options);
  ~NvmlCollector() override;
  NvmlCollector(const NvmlCollector&) = delete;
  NvmlCollector& operator=(const NvmlCollector&) = delete;

  Snapshot Collect() override;
  void CollectInto(Snapshot& snapshot) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A source that returns the same snapshot every time (captured input, tests).
class FixedSnapshotSource final : public SnapshotSource {
 public:
  explicit FixedSnapshotSource(Snapshot snapshot) : snapshot_(std::move(snapshot)) {}
  Snapshot Collect() override { return snapshot_; }

 private:
  Snapshot snapshot_;
};

}  // namespace gpudoctor
