// The findings `status` shows beside its table: the rules that need only a snapshot.
#pragma once

#include <vector>

#include "health/finding.h"
#include "model/snapshot.h"

namespace gpudoctor {

std::vector<Finding> StatusFindings(const Snapshot& snapshot);

}  // namespace gpudoctor
