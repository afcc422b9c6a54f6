// XidMailbox: which of a scenario's Xid events one NVML event set receives.
//
// A set receives an event of a GPU it registered for when the event's
// scenario time lies in (registered_at - xid_lookback, now]; each event
// arrives once per set, oldest first.
//
//   XidMailbox mailbox(scenario);
//   mailbox.Register(/*gpu=*/3, /*registered_at=*/t);
//   if (auto xid = mailbox.Take(now)) deliver(*xid);
//   else if (auto next = mailbox.NextTime(now)) wait_until(*next);
#pragma once

#include <optional>
#include <vector>

#include "scenario.h"

namespace gpudoctor::fake_nvml {

class XidMailbox {
 public:
  explicit XidMailbox(const Scenario& scenario);

  // Registering a GPU twice keeps the first registration.
  void Register(uint32_t gpu, double registered_at);

  // The oldest event due by `now` not yet taken; marks it taken.
  std::optional<XidSpec> Take(double now);

  // The time of the next event this set will receive after `now`.
  std::optional<double> NextTime(double now) const;

 private:
  bool Eligible(size_t event) const;

  const Scenario& scenario_;
  std::vector<std::optional<double>> since_;  // per GPU: events must be later than this
  std::vector<bool> taken_;                   // per scenario Xid
};

}  // namespace gpudoctor::fake_nvml
