// Which card a GPU is when it no longer answers. A GPU that fell off the bus
// answers nothing (not even its UUID, serial or PCI address), yet it is the
// one card the operator must pull: it keeps the identity it was last seen
// with, marked as remembered (GpuSnapshot::last_known), from what the agent
// saw, the agent's history, or the kernel log that named its address.
//
//   IdentityMemory memory;        // the agent: across samples
//   memory.Observe(snapshot);     // remembers every GPU that answers
//   memory.Recall(snapshot);      // names those that do not
//
//   RecallIdentities(snapshot, {.log_events = &events, .history_database = path, .now = now});  // one-shot
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "logs/event.h"
#include "model/snapshot.h"
#include "store/history_store.h"

namespace gpudoctor {

// True when the GPU cannot say which card it is now.
bool IdentityUnreadable(const GpuSnapshot& gpu);

// How a GPU's identity is known, as every output labels it ("identity"):
// read from the card now, remembered from before it stopped answering, or
// not known at all (a GPU that never answered, with nothing that names it).
enum class IdentityKnowledge { kRead, kLastKnown, kUnknown };
const char* IdentityKnowledgeName(IdentityKnowledge knowledge);  // "read", "last_known", "unknown"
IdentityKnowledge IdentityKnowledgeOf(const GpuSnapshot& gpu);

class IdentityMemory {
 public:
  // Remembers each GPU that answers, by index.
  void Observe(const Snapshot& snapshot);
  // Starts from what a history kept (an agent that starts after the loss).
  void Seed(const std::vector<GpuIdentity>& gpus);
  // Fills last_known of each GPU that cannot say which card it is.
  void Recall(Snapshot& snapshot) const;

 private:
  std::map<uint32_t, KnownGpuIdentity> known_;
};

struct RecallSources {
  const std::vector<LogEvent>* log_events = nullptr;  // addresses the kernel log names
  std::string history_database;                       // the agent's history, read-only; empty: none
  WallTime now;
};

// For a one-shot command: names each GPU that cannot say which card it is by
// the agent's history (the identity last seen at its index) and, for its
// PCI address, by the kernel log's "fallen off the bus" lines (Xid 79) when
// exactly one such GPU and one such address no answering GPU holds are left.
void RecallIdentities(Snapshot& snapshot, const RecallSources& sources);

}  // namespace gpudoctor
