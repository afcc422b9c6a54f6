// IncidentTracker: which findings are open incidents, and what changed in
// each round of findings.
//
// The one place that decides when an incident opens, changes severity or
// resolves. The agent keeps one for its whole run, so its presenters and
// alerts learn of an incident at once, whether or not the history store can
// be written; the store records what the tracker decided (RecordIncidents).
// HistoryStore::UpsertFindings runs one over the store's own incidents.
//
//   IncidentTracker incidents;
//   incidents.Adopt(*store.OpenIncidents(), *store.LastIncidentId(), now);
//   std::vector<FindingTransition> changes = incidents.Update(findings, now);
//   store.RecordIncidents(incidents.Touched());
//   changes = incidents.Acknowledge(ack.incident_id, ack.at);   // gpudoctor ack
//
// Ids continue from the store's, so an incident keeps its id across agent
// restarts. Until a store has been adopted, new incidents get provisional
// negative ids; Adopt numbers them after the store's and says how.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "store/history_store.h"

namespace gpudoctor {

class IncidentTracker {
 public:
  struct Adoption {
    std::vector<std::pair<int64_t, int64_t>> renumbered;  // provisional id -> the id it has from now on
    // Incidents the store still held open that the tracker had already
    // judged absent (it had run while the store was out of reach).
    std::vector<FindingTransition> resolved;
  };

  // Continues from a store: its open incidents and the highest id it has
  // used. Before the first Update the store's open incidents are taken as
  // they are; after it, an open incident of the store whose key the tracker
  // has open too keeps the store's id, and one the tracker has not is
  // resolved `now`. Touched() then holds everything the store must record.
  Adoption Adopt(std::vector<StoredFinding> stored_open, int64_t last_stored_id, WallTime now);

  // Judges one round of findings (those present `now`): opens, refreshes and
  // resolves incidents. Several findings with one key count as the worst.
  std::vector<FindingTransition> Update(std::span<const Finding> findings, WallTime now);

  // An operator has dealt with open incident `incident_id` (gpudoctor ack):
  // it and the open incidents that are part of it resolve `at`, as
  // acknowledged. Their findings open no new incident while they stay as
  // they were - present, no worse, with no event newer than `at` - and open a
  // new one once they have cleared, or when they get worse or show a newer
  // event. An id that is not open changes nothing. Touched() holds the result.
  std::vector<FindingTransition> Acknowledge(int64_t incident_id, WallTime at);
  // Takes up an acknowledgement made before a restart: findings with `key`
  // stay quiet as above.
  void RestoreAcknowledgement(const std::string& key, Severity severity, WallTime at);

  // The open incidents, in the order they opened.
  const std::vector<StoredFinding>& open() const { return open_; }
  // What the last Update or Adopt changed, for the store: every open incident
  // (its last_seen moved) and those that resolved, resolved ones first.
  std::span<const StoredFinding> Touched() const { return touched_; }
  bool adopted() const { return adopted_; }

 private:
  struct Acknowledged {
    Severity severity = Severity::kWarning;
    WallTime at;
  };

  int64_t NewId() { return adopted_ ? ++last_id_ : --last_provisional_id_; }
  void SetTouched(std::vector<StoredFinding> resolved);
  // `findings` less those an acknowledgement still covers; forgets the
  // acknowledgements whose findings cleared or came back.
  std::vector<Finding> WithoutAcknowledged(std::span<const Finding> findings);

  std::vector<StoredFinding> open_;
  std::map<std::string, Acknowledged> acknowledged_;  // by key
  std::vector<StoredFinding> touched_;
  // Provisional ids handed out before adoption, open or resolved since.
  std::vector<int64_t> provisional_ids_;
  int64_t last_id_ = 0;
  int64_t last_provisional_id_ = 0;
  bool adopted_ = false;
  bool updated_ = false;
};

}  // namespace gpudoctor
