#include "cli/version.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "cli/sources.h"
#include "common/loadable_module.h"

namespace gpudoctor {
namespace {

struct FileSpec {
  const char* file;
  const char* role;
  const char* purpose;
};

// What gpudoctor installs beside itself, in the order --version lists them.
constexpr FileSpec kShippedFiles[] = {
    {"gpudoctor-probe", "probe", "reads NVML; without it gpudoctor is its own probe"},
    {"libgpudoctor_http_server.so", "module", "the agent's HTTP server"},
    {"libgpudoctor_http_client.so", "module", "the HTTP client of webhooks and fleet"},
    {"libgpudoctor_trace_alloc.so", "preload", "preloaded by trace-alloc"},
    {"libgpudoctor_fake_nvml.so", "fake", "the NVML of --simulate"},
    {"libgpudoctor_fake_cuda.so", "fake", "the CUDA driver of diag --simulate"},
};

// The heading of each role in the text form.
constexpr std::pair<const char*, const char*> kRoleHeadings[] = {
    {"probe", "probe"}, {"module", "modules"}, {"preload", "trace-alloc"}, {"fake", "fake libraries"}};

std::optional<std::string> Locate(const FileSpec& spec) {
  if (std::string_view(spec.role) == "probe") {  // run from beside gpudoctor only (nvml/probe.cc)
    const std::string beside = ModuleSearchPaths(spec.file).front();
    if (access(beside.c_str(), X_OK) == 0) return beside;
    return std::nullopt;
  }
  Result<std::string> found = FindShippedLibrary(spec.file);
  if (!found) return std::nullopt;
  return *found;
}

// "memtest, burn: PTX ISA 7.0 for sm_70", or each set on its own when they differ; "" when none was built.
std::string KernelSummary(const std::vector<DiagKernelSet>& kernels) {
  std::vector<std::string> groups;
  std::vector<std::pair<std::string, std::vector<std::string>>> by_header;  // "PTX ISA 7.0 for sm_70" -> names
  for (const DiagKernelSet& set : kernels) {
    if (!set.built) continue;
    const std::string header = fmt::format("PTX ISA {} for {}", set.ptx_isa.empty() ? "unknown" : set.ptx_isa,
                                           set.target.empty() ? "an unknown target" : set.target);
    const auto same = [&header](const auto& entry) { return entry.first == header; };
    auto it = std::find_if(by_header.begin(), by_header.end(), same);
    if (it == by_header.end()) by_header.push_back({header, {set.name}});
    else it->second.push_back(set.name);
  }
  for (const auto& [header, names] : by_header) groups.push_back(fmt::format("{}: {}", fmt::join(names, ", "), header));
  return fmt::format("{}", fmt::join(groups, "; "));
}

}  // namespace

VersionDescription DescribeThisBuild() {
  VersionDescription description{.build = GetBuildInfo(), .kernels = BuiltInDiagKernels(), .files = {}};
  for (const FileSpec& spec : kShippedFiles)
    description.files.push_back({.file = spec.file, .role = spec.role, .purpose = spec.purpose, .path = Locate(spec)});
  return description;
}

std::string VersionText(const VersionDescription& description) {
  const BuildInfo& build = description.build;
  std::string text = fmt::format("gpudoctor {}\n", build.version);
  auto line = [&text](std::string_view heading, std::string_view value) {
    text += fmt::format("{:<16}{}\n", heading.empty() ? std::string() : std::string(heading) + ":", value);
  };
  line("commit", build.commit);
  line("built", build.date);
  line("compiler", fmt::format("{} ({})", build.compiler, build.build_type));
  const std::string kernels = KernelSummary(description.kernels);
  if (kernels.empty()) line("diag kernels", "none: built without clang-16, so `gpudoctor diag` cannot test GPUs");
  else line("diag kernels", fmt::format("{}, compiled by {}", kernels, build.kernel_compiler));
  for (const auto& [role, heading] : kRoleHeadings) {
    bool first = true;
    for (const ShippedFile& file : description.files) {
      if (file.role != role) continue;
      line(first ? heading : "", file.path ? fmt::format("{} ({})", *file.path, file.purpose)
                                           : fmt::format("{} not installed ({})", file.file, file.purpose));
      first = false;
    }
  }
  return text;
}

nlohmann::ordered_json VersionJson(const VersionDescription& description) {
  const BuildInfo& build = description.build;
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const DiagKernelSet& set : description.kernels) {
    nlohmann::ordered_json entry{{"name", set.name}, {"built", set.built}};
    entry["ptx_isa"] = set.ptx_isa.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(set.ptx_isa);
    entry["target"] = set.target.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(set.target);
    entry["bytes"] = set.bytes;
    kernels.push_back(std::move(entry));
  }
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const ShippedFile& file : description.files) {
    files.push_back({{"file", file.file},
                     {"role", file.role},
                     {"purpose", file.purpose},
                     {"path", file.path ? nlohmann::ordered_json(*file.path) : nlohmann::ordered_json()}});
  }
  return {{"version", build.version},
          {"commit", build.commit},
          {"build_date", build.date},
          {"compiler", build.compiler},
          {"build_type", build.build_type},
          {"diag_kernels",
           {{"compiler", build.kernel_compiler.empty() ? nlohmann::ordered_json()
                                                       : nlohmann::ordered_json(build.kernel_compiler)},
            {"sets", std::move(kernels)}}},
          {"files", std::move(files)}};
}

std::vector<std::pair<std::string, std::string>> BuildInfoLabels(const VersionDescription& description) {
  const BuildInfo& build = description.build;
  const std::string kernels = KernelSummary(description.kernels);
  return {{"version", std::string(build.version)},
          {"commit", std::string(build.commit)},
          {"build_date", std::string(build.date)},
          {"compiler", std::string(build.compiler)},
          {"build_type", std::string(build.build_type)},
          {"diag_kernels", kernels.empty() ? "none" : kernels}};
}

}  // namespace gpudoctor
