#include "health/cuda_compat.h"

#include <algorithm>
#include <cassert>

#include "common/text.h"
#include "health/embedded_data.h"

namespace gpudoctor {

std::optional<CudaVersion> ParseCudaVersion(std::string_view text) {
  auto parts = Split(Trim(text), '.');
  if (parts.size() < 2 || parts.size() > 3) return std::nullopt;
  auto major = ParseInt<int>(parts[0]);
  auto minor = ParseInt<int>(parts[1]);
  if (!major || !minor || *major <= 0 || *major > 99 || *minor < 0 || *minor > 99) return std::nullopt;
  if (parts.size() == 3 && !ParseInt<int>(parts[2])) return std::nullopt;
  return CudaVersion{*major, *minor};
}

CudaVersion CudaVersionFromInt(int32_t version) { return {version / 1000, version % 1000 / 10}; }

std::string CudaVersion::ToString() const { return std::to_string(major) + "." + std::to_string(minor); }

std::optional<DriverVersion> ParseDriverVersion(std::string_view text) {
  DriverVersion version;
  for (std::string_view part : Split(Trim(text), '.')) {
    auto number = ParseInt<uint32_t>(part);
    if (!number) return std::nullopt;
    version.parts.push_back(*number);
  }
  if (version.parts.empty() || version.parts.size() > 4) return std::nullopt;
  version.text = std::string(Trim(text));
  return version;
}

Result<CudaDriverTable> CudaDriverTable::Parse(std::string_view tsv) {
  CudaDriverTable table;
  size_t line_number = 0;
  for (std::string_view line : Split(tsv, '\n')) {
    ++line_number;
    line = Trim(line);
    if (line.empty() || line.front() == '#') continue;
    auto columns = Split(line, '\t');
    std::optional<CudaVersion> cuda = columns.size() == 3 ? ParseCudaVersion(columns[0]) : std::nullopt;
    std::optional<DriverVersion> min_driver = columns.size() == 3 ? ParseDriverVersion(columns[1]) : std::nullopt;
    std::optional<DriverVersion> minor_compat = columns.size() == 3 ? ParseDriverVersion(columns[2]) : std::nullopt;
    if (!cuda || !min_driver || !minor_compat) {
      return Error{"cuda driver table line " + std::to_string(line_number) +
                   ": expected 'cuda<TAB>min_driver<TAB>minor_compat'"};
    }
    table.rows_.push_back({*cuda, *min_driver, *minor_compat});
  }
  std::sort(table.rows_.begin(), table.rows_.end(),
            [](const CudaDriverRequirement& a, const CudaDriverRequirement& b) { return a.cuda > b.cuda; });
  return table;
}

const CudaDriverTable& CudaDriverTable::Builtin() {
  static const CudaDriverTable table = [] {
    Result<CudaDriverTable> parsed = Parse(kCudaDriverTable);
    assert(parsed.ok() && "data/cuda_driver_table.tsv does not parse");
    return parsed.ok() ? std::move(parsed).value() : CudaDriverTable{};
  }();
  return table;
}

const CudaDriverRequirement* CudaDriverTable::Find(CudaVersion cuda) const {
  for (const CudaDriverRequirement& row : rows_)
    if (row.cuda == cuda) return &row;
  return nullptr;
}

}  // namespace gpudoctor
