// What runs: `gpudoctor --version` (and `--version --json`), the first lines of a support bundle, and the
// labels of the agent's gpudoctor_build_info. The build (common/build_info.h), the diag kernels compiled in
// (diag/diag_kernels.h), and the probe, modules and fake libraries this binary finds where it would load them.
//
//   std::fputs(VersionText(DescribeThisBuild()).c_str(), stdout);
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/build_info.h"
#include "diag/diag_kernels.h"

namespace gpudoctor {

// A file installed with gpudoctor and loaded or run from beside it (common/loadable_module.h).
struct ShippedFile {
  std::string file;                 // "libgpudoctor_http_server.so"
  std::string role;                 // "probe", "module", "preload", "fake"
  std::string purpose;              // "the agent's HTTP server"
  std::optional<std::string> path;  // where it was found; nullopt: not installed
};

struct VersionDescription {
  BuildInfo build;
  std::vector<DiagKernelSet> kernels;
  std::vector<ShippedFile> files;
};

// This build, with the shipped files looked up where this binary would look for them.
VersionDescription DescribeThisBuild();

// The text of `--version`. Its first line is "gpudoctor VERSION" alone, as man-page generators read it.
std::string VersionText(const VersionDescription& description);
nlohmann::ordered_json VersionJson(const VersionDescription& description);

// gpudoctor_build_info's labels: version, commit, build_date, compiler, build_type, diag_kernels.
std::vector<std::pair<std::string, std::string>> BuildInfoLabels(const VersionDescription& description);

}  // namespace gpudoctor
