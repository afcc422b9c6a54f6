// CUDA and driver compatibility: which NVIDIA driver a CUDA toolkit version
// needs, from the table in data/cuda_driver_table.tsv (compiled in).
//
//   const CudaDriverRequirement* need = CudaDriverTable::Builtin().Find({12, 4});
//   if (need && *ParseDriverVersion("535.129.03") < need->min_driver) ...
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpudoctor {

struct CudaVersion {
  int major = 0;
  int minor = 0;
  auto operator<=>(const CudaVersion&) const = default;
  std::string ToString() const;  // "12.4"
};
// "12.4" or "12.4.1" (the patch is ignored) -> {12, 4}.
std::optional<CudaVersion> ParseCudaVersion(std::string_view text);
// NVML's integer form: 12040 -> {12, 4}.
CudaVersion CudaVersionFromInt(int32_t version);

// A driver version such as "550.54.15", compared part by part as numbers.
struct DriverVersion {
  std::vector<uint32_t> parts;
  std::string text;  // as written, e.g. "535.129.03"
  std::strong_ordering operator<=>(const DriverVersion& other) const { return parts <=> other.parts; }
  bool operator==(const DriverVersion& other) const { return parts == other.parts; }
};
std::optional<DriverVersion> ParseDriverVersion(std::string_view text);

struct CudaDriverRequirement {
  CudaVersion cuda;
  DriverVersion min_driver;    // runs everything built with this toolkit
  DriverVersion minor_compat;  // runs it through minor version compatibility
};

class CudaDriverTable {
 public:
  // The table compiled in from data/cuda_driver_table.tsv.
  static const CudaDriverTable& Builtin();
  // Tab-separated rows "cuda min_driver minor_compat"; '#' starts a comment.
  static Result<CudaDriverTable> Parse(std::string_view tsv);

  // The row for exactly this major.minor, or nullptr.
  const CudaDriverRequirement* Find(CudaVersion cuda) const;
  const std::vector<CudaDriverRequirement>& rows() const { return rows_; }

 private:
  std::vector<CudaDriverRequirement> rows_;
};

}  // namespace gpudoctor
