#include "cli/sources.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "common/input_file.h"
#include "common/loadable_module.h"
#include "nvml/probe.h"
#include "scenario.h"        // the fake NVML library's scenario format
#include "scenario_clock.h"  // and its clock

namespace gpudoctor {

Result<std::string> FindShippedLibrary(std::string_view file_name) {
  const std::vector<std::string> candidates = ModuleSearchPaths(file_name);
  for (const std::string& candidate : candidates) {
    std::error_code ec;
    if (std::filesystem::exists(candidate, ec)) return std::filesystem::path(candidate).lexically_normal().string();
  }
  return Error{fmt::format("{} is not installed (looked in {} and {})", file_name, candidates[0], candidates[1])};
}

InputText ReadOptionInput(std::string_view option, const std::string& path, uint64_t max_bytes) {
  auto fail = [&](const Error& error, int exit_status) {
    return InputText{{}, SourceError{std::string(option) + ": " + error.message, exit_status}};
  };
  auto file = InputFile::Open(path);
  if (!file) return fail(file.error(), exit_code::kNoInput);
  auto text = file->ReadAll(max_bytes);
  if (!text) return fail(text.error(), exit_code::kDataError);
  return InputText{std::move(*text), std::nullopt};
}

CommandConfig LoadCommandConfig(const CommandContext& context) {
  const std::string& path = context.options.config_path;
  if (path.empty()) return {DefaultHealthConfig(), std::nullopt};
  InputText input = ReadOptionInput(context.options.config_label, path, kMaxConfigFileBytes);
  if (input.error) return {{}, input.error};
  auto config = ApplyHealthConfig(DefaultHealthConfig(), input.text, path);
  if (!config) return {{}, SourceError{config.error().message, exit_code::kDataError}};
  return {std::move(*config), std::nullopt};
}

Result<CollectorOptions> CollectorOptionsFor(const CommandContext& context) {
  const GlobalOptions& options = context.options;
  CollectorOptions collector;
  collector.probe_executable = ProbeExecutableBeside(context.executable_path);
  collector.deadline = std::chrono::milliseconds(static_cast<int64_t>(options.probe_deadline_s * 1000));
  collector.library_path = options.nvml_library;
  if (!options.simulate.empty()) {
    auto fake = FindShippedLibrary("libgpudoctor_fake_nvml.so");
    if (!fake) return fake.error();
    collector.library_path = *fake;
    // One timeline for every probe this command starts (see docs/scenarios.md).
    if (std::getenv("GPUDOCTOR_FAKE_EPOCH_MS") == nullptr)
      setenv("GPUDOCTOR_FAKE_EPOCH_MS", std::to_string(ToUnixMillis(std::chrono::system_clock::now())).c_str(), 1);
    std::error_code ec;
    collector.scenario_path = std::filesystem::absolute(options.simulate, ec).string();
  }
  return collector;
}

// The --simulate scenario, read as the fake library will read it in the
// probe, where a mistake would only show as NVML failing to start.
std::optional<SourceError> CheckScenario(const std::string& path, fake_nvml::Scenario& scenario) {
  InputText text = ReadOptionInput("--simulate", path, fake_nvml::kMaxScenarioFileBytes);
  if (text.error) return text.error;
  auto parsed = fake_nvml::ParseScenario(text.text, path);
  if (!parsed) return SourceError{"--simulate: " + parsed.error().message, exit_code::kDataError};
  scenario = std::move(*parsed);
  return std::nullopt;
}

namespace {

// The scenario's clock as the probes will run it (after CollectorOptionsFor
// has set the shared epoch); null when scenario time is pinned or runs at 1x.
Result<std::unique_ptr<const ScaledClock>> ScenarioClockOf(const fake_nvml::Scenario& scenario) {
  auto clock = fake_nvml::MakeScenarioClock(fake_nvml::ClockOverrides::FromEnvironment(), scenario.time_scale,
                                            std::chrono::system_clock::now());
  if (!clock) return clock.error();
  if (clock->pinned_seconds() || clock->time_scale() == 1.0) return std::unique_ptr<const ScaledClock>();
  return std::make_unique<const ScaledClock>(FromUnixMillis(clock->epoch_ms()), clock->time_scale());
}

}  // namespace

SnapshotSourceResult MakeSnapshotSource(const CommandContext& context, SnapshotTiming timing) {
  SnapshotSourceResult result;
  fake_nvml::Scenario scenario;
  if (!context.options.simulate.empty()) {
    result.error = CheckScenario(context.options.simulate, scenario);
    if (result.error) return result;
  }
  auto options = CollectorOptionsFor(context);
  if (!options) {
    result.error = SourceError{options.error().message, exit_code::kNoInput};
    return result;
  }
  if (timing == SnapshotTiming::kScenario && !context.options.simulate.empty()) {
    auto clock = ScenarioClockOf(scenario);
    if (!clock) {
      result.error = SourceError{"--simulate: " + clock.error().message, exit_code::kUsage};
      return result;
    }
    result.scenario_clock = std::move(*clock);
    if (result.scenario_clock) options->clock = result.scenario_clock.get();
  }
  result.description = context.options.simulate.empty() ? "live NVML" : "simulated: " + context.options.simulate;
  result.source = std::make_unique<NvmlCollector>(std::move(*options));
  return result;
}

}  // namespace gpudoctor
