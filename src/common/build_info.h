// BuildInfo: what this binary is, fixed when the build was configured (cmake/build_info.cmake).
//
// Every program, module and output that names gpudoctor's version reads it here, so they cannot disagree;
// changing the version recompiles one file.
//
//   fmt::print("gpudoctor {} ({})\n", GetBuildInfo().version, GetBuildInfo().commit);
#pragma once

#include <string_view>

namespace gpudoctor {

struct BuildInfo {
  std::string_view version;          // "0.1.0": GPUDOCTOR_VERSION, default the project's
  std::string_view commit;           // the git commit configured from; "unknown" outside a git checkout
  std::string_view date;             // "2024-05-01T12:00:00Z": SOURCE_DATE_EPOCH or the commit's date, never
                                     // the clock; "unknown" when neither is known
  std::string_view compiler;         // "GNU 12.2.0"
  std::string_view build_type;       // "RelWithDebInfo", with " +ASan +UBSan" or " +libFuzzer" when instrumented
  std::string_view kernel_compiler;  // what compiled the diag kernels to PTX ("clang 16.0.6"); empty: none
};

const BuildInfo& GetBuildInfo();

}  // namespace gpudoctor
