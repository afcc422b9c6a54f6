// JSON form of the snapshot. The field names are a documented, stable
// interface (docs/snapshot.md); the probe process also uses this form to hand
// its readings to the parent.
//
// A field with a value appears as that value. A field without one is null,
// and its name is listed in the object's "not_supported" array or given a
// message in its "errors" object.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "common/result.h"
#include "model/snapshot.h"

namespace gpudoctor {

// What is missing for a reason worth saying once rather than field by field
// (a GPU without GPM, GPM's first sample); the "notes" array of a GPU's JSON.
std::vector<std::string> GpuNotes(const GpuSnapshot& gpu);

nlohmann::json GpuToJson(const GpuSnapshot& gpu);
Result<GpuSnapshot> GpuFromJson(const nlohmann::json& json);

nlohmann::json SnapshotToJson(const Snapshot& snapshot);
Result<Snapshot> SnapshotFromJson(const nlohmann::json& json);

}  // namespace gpudoctor
