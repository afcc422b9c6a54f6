// Where a command's snapshot comes from: live NVML or a simulated server
// (--simulate); a capture (--from) is read by capture/capture.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "common/exit_codes.h"
#include "common/result.h"
#include "health/health_config.h"
#include "nvml/collector.h"

namespace gpudoctor {

struct SnapshotSourceResult {
  std::unique_ptr<SnapshotSource> source;
  std::string description;  // e.g. "simulated: examples/overheating.toml"
  std::optional<SourceError> error;
  // With SnapshotTiming::kScenario, the scenario's clock the snapshots are
  // stamped with; null: the system clock. The command judges by clock().
  std::unique_ptr<const ScaledClock> scenario_clock;
  const Clock& clock() const {
    if (scenario_clock) return *scenario_clock;
    return SystemClock::Instance();
  }
  double time_scale() const { return scenario_clock ? scenario_clock->scale() : 1.0; }
};

// What a command's snapshots are timed by. kScenario is for a command that
// watches over time (the agent): under --simulate its clock runs at the
// scenario's time_scale from the epoch every probe shares (docs/scenarios.md),
// so the detectors' windows are scenario time, not wall time. Time pinned
// ($GPUDOCTOR_FAKE_NOW) or a time_scale of 1 keep the system clock.
enum class SnapshotTiming { kSystem, kScenario };

// Live or simulated NVML per the global options (captures are read by
// capture/capture.h). A scenario that cannot be opened is exit 66; one over
// its size limit or not in its format, 65; a malformed $GPUDOCTOR_FAKE_* time
// setting, 64.
SnapshotSourceResult MakeSnapshotSource(const CommandContext& context,
                                        SnapshotTiming timing = SnapshotTiming::kSystem);

// The collector options the global options imply (library, scenario, deadline).
Result<CollectorOptions> CollectorOptionsFor(const CommandContext& context);

// The text of a file an option names, read under the input rule
// (common/input_file.h). The error names the option and carries exit 66
// when the file cannot be opened (missing, permission denied, not a regular
// file) and 65 when it is over `max_bytes` or a read fails.
struct InputText {
  std::string text;
  std::optional<SourceError> error;
};
InputText ReadOptionInput(std::string_view option, const std::string& path, uint64_t max_bytes);

// The health configuration: built-in defaults, with --config applied on top.
// Errors: 66 the file cannot be opened, 65 it is too large or not a valid config.
struct CommandConfig {
  HealthConfig config;
  std::optional<SourceError> error;  // set: `config` must not be used
};
CommandConfig LoadCommandConfig(const CommandContext& context);

// A library shipped with gpudoctor (the fake NVML and CUDA libraries), found
// where its modules are (common/loadable_module.h), or an error naming where
// it looked.
Result<std::string> FindShippedLibrary(std::string_view file_name);

}  // namespace gpudoctor
