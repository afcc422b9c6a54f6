#include "assess/identity.h"

#include <algorithm>
#include <set>

#include "assess/agent_history.h"
#include "common/text.h"

namespace gpudoctor {
namespace {

KnownGpuIdentity FromHistory(const GpuIdentity& gpu) {
  return {.uuid = gpu.uuid,
          .serial = gpu.serial,
          .pci_bus_id = gpu.pci_bus_id,
          .name = gpu.name,
          .source = "the agent's history",
          .seen_at = gpu.last_seen};
}

// Gives `known` to the GPU, field by field where it has none yet.
void Remember(GpuSnapshot& gpu, const KnownGpuIdentity& known) {
  if (!gpu.last_known) {
    gpu.last_known = known;
    return;
  }
  KnownGpuIdentity& kept = *gpu.last_known;
  for (auto [field, value] : {std::pair{&kept.uuid, &known.uuid}, {&kept.serial, &known.serial},
                              {&kept.pci_bus_id, &known.pci_bus_id}, {&kept.name, &known.name}}) {
    if (field->empty()) *field = *value;
  }
}

std::string Bus(const std::string& text) { return NormalizePciBusId(text).value_or(""); }

}  // namespace

bool IdentityUnreadable(const GpuSnapshot& gpu) {
  return gpu.access_error != AccessError::kNone || (!gpu.uuid.has_value() && !gpu.pci_bus_id.has_value());
}

const char* IdentityKnowledgeName(IdentityKnowledge knowledge) {
  switch (knowledge) {
    case IdentityKnowledge::kRead: return "read";
    case IdentityKnowledge::kLastKnown: return "last_known";
    case IdentityKnowledge::kUnknown: return "unknown";
  }
  return "unknown";
}

IdentityKnowledge IdentityKnowledgeOf(const GpuSnapshot& gpu) {
  if (!IdentityUnreadable(gpu)) return IdentityKnowledge::kRead;
  if (gpu.last_known) return IdentityKnowledge::kLastKnown;
  // Unreadable now, yet a serial or address read before the failure still names the card.
  const bool named = gpu.uuid.has_value() || gpu.serial.has_value() || gpu.pci_bus_id.has_value();
  return named ? IdentityKnowledge::kRead : IdentityKnowledge::kUnknown;
}

void IdentityMemory::Observe(const Snapshot& snapshot) {
  for (const GpuSnapshot& gpu : snapshot.gpus) {
    if (IdentityUnreadable(gpu)) continue;
    known_[gpu.index] = {.uuid = gpu.uuid.value_or(""),
                         .serial = gpu.serial.value_or(""),
                         .pci_bus_id = gpu.pci_bus_id.value_or(""),
                         .name = gpu.name.value_or(""),
                         .source = "the agent's last sample of it",
                         .seen_at = snapshot.taken_at};
  }
}

void IdentityMemory::Seed(const std::vector<GpuIdentity>& gpus) {
  for (const GpuIdentity& gpu : gpus) {
    auto [it, inserted] = known_.try_emplace(gpu.index, FromHistory(gpu));
    if (!inserted && gpu.last_seen && (!it->second.seen_at || *gpu.last_seen > *it->second.seen_at))
      it->second = FromHistory(gpu);
  }
}

void IdentityMemory::Recall(Snapshot& snapshot) const {
  for (GpuSnapshot& gpu : snapshot.gpus) {
    if (!IdentityUnreadable(gpu)) continue;
    if (auto it = known_.find(gpu.index); it != known_.end()) Remember(gpu, it->second);
  }
}

void RecallIdentities(Snapshot& snapshot, const RecallSources& sources) {
  std::vector<GpuSnapshot*> lost;
  for (GpuSnapshot& gpu : snapshot.gpus)
    if (IdentityUnreadable(gpu)) lost.push_back(&gpu);
  if (lost.empty()) return;

  if (!sources.history_database.empty()) {
    OpenedHistory opened = OpenHistoryReadOnly(sources.history_database, sources.now);
    auto gpus = opened.store ? opened.store->ListGpus() : Result<std::vector<GpuIdentity>>(Error{opened.note});
    if (gpus) {
      IdentityMemory memory;
      memory.Seed(*gpus);
      memory.Recall(snapshot);
    }
  }

  // Addresses the kernel log names that no answering or remembered GPU holds.
  if (sources.log_events == nullptr) return;
  std::set<std::string> held;
  for (const GpuSnapshot& gpu : snapshot.gpus) {
    if (gpu.pci_bus_id.has_value()) held.insert(Bus(gpu.pci_bus_id.value()));
    if (gpu.last_known && !gpu.last_known->pci_bus_id.empty()) held.insert(Bus(gpu.last_known->pci_bus_id));
  }
  // Only a line that says a GPU was lost names a lost GPU's address.
  std::set<std::string> named;
  for (const LogEvent& event : *sources.log_events) {
    if (event.kind != "gpu_off_bus" && event.xid != 79) continue;
    const std::string bus = Bus(event.pci_bus_id);
    if (!bus.empty() && !held.contains(bus)) named.insert(bus);
  }
  std::vector<GpuSnapshot*> unplaced;
  for (GpuSnapshot* gpu : lost)
    if (!gpu->last_known || gpu->last_known->pci_bus_id.empty()) unplaced.push_back(gpu);
  // One GPU without an address and one address without a GPU: they are the same card.
  if (unplaced.size() == 1 && named.size() == 1) {
    Remember(*unplaced.front(), {.pci_bus_id = *named.begin(), .source = "the kernel log"});
  }
}

}  // namespace gpudoctor
