// Where a command's snapshot comes from: live NVML, a simulated server
// (--simulate), or captured nvidia-smi output (--from-smi).
#pragma once

#include <memory>
#include <string>

#include "cli/commands.h"
#include "common/result.h"
#include "health/health_config.h"
#include "nvml/collector.h"

namespace gpudoctor {

// An error here carries the exit status to use with its message.
struct SourceError {
  std::string message;
  int exit_code;
};

struct SnapshotSourceResult {
  std::unique_ptr<SnapshotSource> source;
  std::string description;  // e.g. "simulated: examples/overheating.toml"
  std::optional<SourceError> error;
};

// `from_smi` empty: live or simulated NVML per the global options.
SnapshotSourceResult MakeSnapshotSource(const CommandContext& context, const std::string& from_smi);

// The collector options the global options imply (library, scenario, deadline).
Result<CollectorOptions> CollectorOptionsFor(const CommandContext& context);

// The health configuration: built-in defaults, with --config applied on top.
Result<HealthConfig> LoadCommandConfig(const CommandContext& context);

// The fake NVML library shipped beside this binary, or an error naming where it looked.
Result<std::string> FindFakeNvmlLibrary(const std::string& executable_path);

}  // namespace gpudoctor
