#include "xid_mailbox.h"

namespace gpudoctor::fake_nvml {

XidMailbox::XidMailbox(const Scenario& scenario)
    : scenario_(scenario), since_(scenario.gpus.size()), taken_(scenario.xids.size(), false) {}

void XidMailbox::Register(uint32_t gpu, double registered_at) {
  if (gpu < since_.size() && !since_[gpu]) since_[gpu] = registered_at - scenario_.xid_lookback;
}

bool XidMailbox::Eligible(size_t event) const {
  const XidSpec& xid = scenario_.xids[event];
  const std::optional<double>& since = since_[xid.gpu];
  return !taken_[event] && since && xid.at > *since;
}

std::optional<XidSpec> XidMailbox::Take(double now) {
  for (size_t event = 0; event < taken_.size(); ++event) {
    if (scenario_.xids[event].at > now) break;  // sorted by time
    if (!Eligible(event)) continue;
    taken_[event] = true;
    return scenario_.xids[event];
  }
  return std::nullopt;
}

std::optional<double> XidMailbox::NextTime(double now) const {
  for (size_t event = 0; event < taken_.size(); ++event)
    if (scenario_.xids[event].at > now && Eligible(event)) return scenario_.xids[event].at;
  return std::nullopt;
}

}  // namespace gpudoctor::fake_nvml
