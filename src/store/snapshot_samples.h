// Turns a Snapshot into the rows the history keeps.
//
//   SnapshotSamples rows = SamplesFromSnapshot(snapshot);
//   store.Append(rows.gpus, rows.processes);   // or AppendSnapshot(store, snapshot)
//
// Each GPU gives one GpuSample timed at snapshot.taken_at; a field without a
// value (not supported, failed, GPU lost) becomes nullopt, never 0.
#pragma once

#include <vector>

#include "model/snapshot.h"
#include "store/history_store.h"

namespace gpudoctor {

struct SnapshotSamples {
  std::vector<GpuSample> gpus;
  std::vector<ProcessMemorySample> processes;
};

SnapshotSamples SamplesFromSnapshot(const Snapshot& snapshot);
GpuSample SampleFromGpu(const GpuSnapshot& gpu, const Snapshot& snapshot);

Status AppendSnapshot(HistoryStore& store, const Snapshot& snapshot);

}  // namespace gpudoctor
