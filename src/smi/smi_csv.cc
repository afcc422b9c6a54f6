// `nvidia-smi --query-gpu=<columns> --format=csv[,noheader][,nounits]`: one
// row per GPU. The header repeats the column names, with units in brackets
// ("utilization.gpu [%]"); without a header only the command line that
// produced the rows can say what they are.

#include <re2/re2.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "common/re2_view.h"
#include "common/text.h"
#include "smi/smi_fields.h"
#include "smi/smi_formats.h"
#include "smi/smi_values.h"

namespace gpudoctor::smi {
namespace {

// Columns that describe the report rather than a GPU.
constexpr std::string_view kReportColumns[] = {"index", "driver_version", "count", "timestamp"};

bool IsReportColumn(std::string_view column) {
  return std::find(std::begin(kReportColumns), std::end(kReportColumns), column) != std::end(kReportColumns);
}

// "utilization.gpu [%]" -> "utilization.gpu"; nullopt when it is not a column name.
std::optional<std::string> ColumnName(std::string_view header_cell) {
  static const RE2 kColumn(R"(\s*([A-Za-z][A-Za-z0-9_.]*)\s*(?:\[[^\]]*\])?\s*)");
  std::string name;
  if (!RE2::FullMatch(Piece(header_cell), kColumn, &name)) return std::nullopt;
  return ToLower(name);
}

bool IsKnownColumn(std::string_view column) {
  return IsReportColumn(column) || IsKnownGpuReading(ReadingNaming::kCsv, column);
}

void ApplyReportColumn(std::string_view column, std::string_view value, Snapshot& snapshot, GpuSnapshot& gpu) {
  if (column == "index") {
    if (auto index = ParseInt<uint32_t>(value)) gpu.index = *index;
  } else if (column == "driver_version") {
    snapshot.driver_version = TextField(value);
  } else if (column == "count") {
    snapshot.device_count = NumberField<uint32_t>(value);
  } else if (column == "timestamp") {
    // Each row has its own time; the snapshot is as old as its first row.
    if (auto time = ParseSmiTimestamp(value); time && snapshot.taken_at == WallTime{}) snapshot.taken_at = *time;
  }
}

}  // namespace

std::optional<CsvCommand> ParseCsvCommand(std::string_view command_line) {
  static const RE2 kQuery(R"(--query-gpu[=\s]\s*["']?([A-Za-z0-9_.,]+))");
  static const RE2 kFormat(R"(--format[=\s]\s*["']?([A-Za-z,]+))");
  std::string columns;
  if (!RE2::PartialMatch(Piece(command_line), kQuery, &columns)) return std::nullopt;
  CsvCommand command;
  for (std::string_view column : Split(columns, ',')) {
    if (!column.empty()) command.columns.push_back(ToLower(column));
  }
  std::string format;
  if (RE2::PartialMatch(Piece(command_line), kFormat, &format)) {
    for (std::string_view option : Split(format, ',')) command.has_header &= option != "noheader";
  }
  return command;
}

bool LooksLikeCsvRows(std::span<const std::string_view> lines) {
  if (lines.empty()) return false;
  const size_t cells = Split(lines.front(), ',').size();
  // A reading is short ("40536 MiB", "[N/A]", a GPU's name, a UUID); a sentence with commas in it is no row.
  constexpr size_t kLongestCell = 96;
  auto row = [&](std::string_view line) {
    const std::vector<std::string_view> split = Split(line, ',');
    return split.size() == cells && std::all_of(split.begin(), split.end(), [](std::string_view cell) {
             return Trim(cell).size() <= kLongestCell;
           });
  };
  return cells > 1 && std::all_of(lines.begin(), lines.end(), row);
}

bool LooksLikeCsvHeader(std::string_view line) {
  bool any_known = false;
  for (std::string_view cell : Split(line, ',')) {
    std::optional<std::string> column = ColumnName(cell);
    if (!column) return false;
    any_known |= IsKnownColumn(*column);
  }
  return any_known;
}

Result<size_t> ParseQueryCsv(std::span<const std::string_view> lines, const std::optional<CsvCommand>& command,
                             Snapshot& snapshot) {
  std::vector<std::string> columns;
  size_t recognised = 0;
  if (!lines.empty() && LooksLikeCsvHeader(lines.front())) {
    for (std::string_view cell : Split(lines.front(), ',')) columns.push_back(ColumnName(cell).value_or(""));
    lines = lines.subspan(1);
    ++recognised;
  } else if (command && !command->columns.empty()) {
    columns = command->columns;
  } else {
    return Error{
        "nvidia-smi CSV without column names: the rows have no header line and no pasted "
        "'nvidia-smi --query-gpu=...' command line names the columns; capture it with --format=csv "
        "(with the header) or include the command line"};
  }

  for (size_t row = 0; row < lines.size(); ++row) {
    const std::vector<std::string_view> cells = Split(lines[row], ',');
    // A row with more cells than columns is not one of these rows. A last
    // row with fewer was cut off; its cells still line up with the columns.
    const bool last = row + 1 == lines.size();
    if (cells.size() > columns.size() || (cells.size() < columns.size() && !last)) continue;
    if (cells.size() < columns.size()) {
      snapshot.incomplete_reasons.push_back("the last CSV row has " + std::to_string(cells.size()) + " of " +
                                            std::to_string(columns.size()) + " columns");
    }
    if (snapshot.gpus.size() == kMaxGpus) return TooManyGpus();
    GpuSnapshot gpu;
    gpu.index = static_cast<uint32_t>(snapshot.gpus.size());
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string_view value = Trim(cells[i]);
      if (IsReportColumn(columns[i])) ApplyReportColumn(columns[i], value, snapshot, gpu);
      else ApplyGpuReading(ReadingNaming::kCsv, columns[i], value, gpu);  // other columns are not in the model
    }
    snapshot.gpus.push_back(std::move(gpu));
    ++recognised;
  }
  return recognised;
}

}  // namespace gpudoctor::smi
