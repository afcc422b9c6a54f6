#include "cli/sources.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "smi/nvidia_smi.h"
#include <cstring>

namespace gpudoctor {

Result<std::string> FindFakeNvmlLibrary(const std::string& executable_path) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(executable_path).parent_path();
  const fs::path candidates[] = {dir / "libgpudoctor_fake_nvml.so",
                                 dir / ".." / "lib" / "gpudoctor" / "libgpudoctor_fake_nvml.so"};
  for (const auto& candidate : candidates) {
    std::error_code ec;
    if (fs::exists(candidate, ec)) return fs::absolute(candidate, ec).lexically_normal().string();
  }
  return Error{"the fake NVML library libgpudoctor_fake_nvml.so is not installed beside " + executable_path};
}

Result<HealthConfig> LoadCommandConfig(const CommandContext& context) {
  if (context.options.config_path.empty()) return DefaultHealthConfig();
  return LoadHealthConfigFile(context.options.config_path);
}

Result<CollectorOptions> CollectorOptionsFor(const CommandContext& context) {
  const GlobalOptions& options = context.options;
  CollectorOptions collector;
  collector.probe_executable = context.executable_path;
  collector.deadline = std::chrono::milliseconds(static_cast<int64_t>(options.probe_deadline_s * 1000));
  collector.library_path = options.nvml_library;
  if (!options.simulate.empty()) {
    std::error_code ec;
    if (access(options.simulate.c_str(), R_OK) != 0)
      return Error{"cannot read scenario " + options.simulate + ": " + std::strerror(errno)};
    auto fake = FindFakeNvmlLibrary(context.executable_path);
    if (!fake) return fake.error();
    collector.library_path = *fake;
    // One timeline for every probe this command starts (see docs/scenarios.md).
    if (std::getenv("GPUDOCTOR_FAKE_EPOCH_MS") == nullptr)
      setenv("GPUDOCTOR_FAKE_EPOCH_MS", std::to_string(ToUnixMillis(std::chrono::system_clock::now())).c_str(), 1);
    collector.scenario_path = std::filesystem::absolute(options.simulate, ec).string();
  }
  return collector;
}

SnapshotSourceResult MakeSnapshotSource(const CommandContext& context, const std::string& from_smi) {
  SnapshotSourceResult result;
  if (!from_smi.empty()) {
    auto snapshot = ReadNvidiaSmiFile(from_smi);
    if (!snapshot) {
      bool unreadable = access(from_smi.c_str(), R_OK) != 0;
      result.error = SourceError{snapshot.error().message, unreadable ? exit_code::kNoInput : exit_code::kDataError};
      return result;
    }
    result.description = "captured nvidia-smi output: " + from_smi;
    result.source = std::make_unique<FixedSnapshotSource>(std::move(*snapshot));
    return result;
  }
  auto options = CollectorOptionsFor(context);
  if (!options) {
    result.error = SourceError{options.error().message, exit_code::kNoInput};
    return result;
  }
  result.description = context.options.simulate.empty() ? "live NVML" : "simulated: " + context.options.simulate;
  result.source = std::make_unique<NvmlCollector>(std::move(*options));
  return result;
}

}  // namespace gpudoctor
