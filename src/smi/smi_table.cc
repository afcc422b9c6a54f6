// The default `nvidia-smi` table. Each GPU is a block of two or three rows,
// three cells wide:
//
//   |   0  NVIDIA H100 80GB HBM3          On  | 00000000:1A:00.0 Off |                    2 |
//   | N/A   33C    P0              71W / 700W |      4MiB / 81559MiB |      0%      Default |
//   |                                         |                      |             Disabled |
//
// i.e. index, name, persistence | bus id, display | volatile uncorrected ECC,
// then fan, temperature, perf state, power / cap | memory used / total |
// utilisation, compute mode. A "Processes:" table may follow.

#include <fmt/format.h>
#include <re2/re2.h>

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/re2_view.h"
#include "common/text.h"
#include "smi/smi_formats.h"
#include "smi/smi_values.h"

namespace gpudoctor::smi {
namespace {

// The cells between the outer bars: "| a | b |" -> {" a ", " b "}.
std::vector<std::string_view> Cells(std::string_view row) {
  row = Trim(row);
  if (row.size() < 2 || row.front() != '|') return {};
  row.remove_prefix(1);
  if (row.back() == '|') row.remove_suffix(1);
  return Split(row, '|');
}

void ApplyHeader(std::string_view row, Snapshot& snapshot) {
  static const RE2 kDriver(R"(Driver Version:\s*(\S+))");
  static const RE2 kCuda(R"(CUDA Version:\s*(\S+))");
  std::string text;
  if (RE2::PartialMatch(Piece(row), kDriver, &text)) snapshot.driver_version = TextField(text);
  if (RE2::PartialMatch(Piece(row), kCuda, &text)) {
    if (auto version = ParseCudaVersion(text)) snapshot.cuda_driver_version = Field<int32_t>::Value(*version);
  }
}

// "|   0  NVIDIA H100 80GB HBM3   On  | 00000000:1A:00.0 Off |   2 |"
bool ApplyFirstRow(const std::vector<std::string_view>& cells, GpuSnapshot& gpu) {
  // The last word is Persistence-M, or the driver model (WDDM/TCC) on Windows.
  static const RE2 kIdentity(R"(\s*(\d+)\s+(.*?)\s+(On|Off|N/A|ERR!|WDDM|TCC)\s*)");
  static const RE2 kIdentityWithoutMode(R"(\s*(\d+)\s+(.*?)\s*)");
  static const RE2 kBus(R"(\s*(\S+).*)");
  if (cells.size() != 3) return false;
  uint32_t index = 0;
  std::string name;
  std::string mode;
  std::string bus_id;
  if (!RE2::FullMatch(Piece(cells[0]), kIdentity, &index, &name, &mode) &&
      !RE2::FullMatch(Piece(cells[0]), kIdentityWithoutMode, &index, &name)) {
    return false;
  }
  if (!RE2::FullMatch(Piece(cells[1]), kBus, &bus_id)) return false;
  gpu.index = index;
  gpu.name = TextField(name);
  gpu.pci_bus_id = PciBusIdField(bus_id);
  if (mode == "On" || mode == "Off" || mode == "ERR!") gpu.persistence_mode = FlagField(mode);

  // Volatile Uncorr. ECC: a count when ECC is on, "Off" when it is off.
  const std::string_view ecc = Trim(cells[2]);
  if (ecc == "Off" || ecc == "On") {
    gpu.ecc_enabled = FlagField(ecc);
  } else {
    gpu.ecc_volatile_uncorrected = NumberField<uint64_t>(ecc);
    if (gpu.ecc_volatile_uncorrected.has_value()) gpu.ecc_enabled = Field<bool>::Value(true);
  }
  return true;
}

// "| N/A   33C    P0    71W / 700W |      4MiB / 81559MiB |      0%      Default |"
bool ApplySecondRow(const std::vector<std::string_view>& cells, GpuSnapshot& gpu) {
  static const RE2 kThermal(R"(\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)\s*)");
  static const RE2 kMemory(R"(\s*(\S+)\s*/\s*(\S+)\s*)");
  static const RE2 kUtilization(R"(\s*(\S+)(?:\s+\S+)?\s*)");
  if (cells.size() != 3) return false;
  std::string fan, temperature, performance_state, power, power_cap, used, total, utilization;
  if (!RE2::FullMatch(Piece(cells[0]), kThermal, &fan, &temperature, &performance_state, &power, &power_cap)) {
    return false;
  }
  gpu.fan_speeds_percent = FanSpeedField(fan);
  gpu.temperature_c = NumberField<uint32_t>(temperature);
  gpu.power_draw_w = NumberField<double>(power);
  gpu.power_limit_w = NumberField<double>(power_cap);
  if (RE2::FullMatch(Piece(cells[1]), kMemory, &used, &total)) {
    gpu.memory_used_bytes = MebibytesField(used);
    gpu.memory_total_bytes = MebibytesField(total);
  }
  if (RE2::FullMatch(Piece(cells[2]), kUtilization, &utilization)) {
    gpu.utilization_gpu_percent = NumberField<uint32_t>(utilization);
  }
  return true;
}

// "|    0   N/A  N/A     12345      C   python       1024MiB |" (the GI and CI
// columns appeared with MIG; older drivers print GPU, PID, Type, name, memory).
bool ApplyProcessRow(std::string_view cell, const std::unordered_map<uint32_t, size_t>& gpu_by_index,
                     Snapshot& snapshot) {
  static const RE2 kProcess(
      R"(\s*(\d+)\s+(?:\S+\s+\S+\s+)?(\d+)\s+(C\+G|C|G|M\+C\+G|M\+C|M\+G|M)\s+(.*?)\s+(\S+)\s*)");
  uint32_t gpu_index = 0;
  ProcessInfo process;
  std::string type, name, memory;
  if (!RE2::FullMatch(Piece(cell), kProcess, &gpu_index, &process.pid, &type, &name, &memory)) return false;
  auto listed = gpu_by_index.find(gpu_index);
  if (listed == gpu_by_index.end()) return false;  // its GPU's rows were cut from the capture
  process.name = name;
  process.used_memory_bytes = MebibytesField(memory);
  snapshot.gpus[listed->second].processes.value().push_back(std::move(process));
  return true;
}

enum class TablePart { kGpus, kMigDevices, kProcesses };

// A GPU row the table shows but that does not read as one (a '|' lost in a
// paste, a line cut or garbled): the GPU is kept, with every reading its
// rows would give failed, so that no rule calls it healthy, and the capture
// is noted incomplete with the row that could not be read.
void FailSecondRowReadings(GpuSnapshot& gpu, const std::string& why) {
  gpu.fan_speeds_percent.SetFailed(why);
  gpu.temperature_c.SetFailed(why);
  gpu.power_draw_w.SetFailed(why);
  gpu.memory_used_bytes.SetFailed(why);
  gpu.utilization_gpu_percent.SetFailed(why);
}

constexpr const char* kDamagedRow = "its row in the capture is damaged";

std::string Excerpt(std::string_view row) {
  constexpr size_t kMax = 100;
  return row.size() <= kMax ? std::string(row) : std::string(row.substr(0, kMax)) + "...";
}

// Adds the GPU whose first row is damaged: its index when the row still
// starts with one, else the one after the previous GPU's.
void AddDamagedGpu(std::string_view row, Snapshot& snapshot) {
  static const RE2 kLeadingIndex(R"(\|\s*(\d+)\s.*)");
  GpuSnapshot gpu;
  if (!RE2::FullMatch(Piece(row), kLeadingIndex, &gpu.index))
    gpu.index = snapshot.gpus.empty() ? 0 : snapshot.gpus.back().index + 1;
  gpu.ecc_volatile_uncorrected.SetFailed(kDamagedRow);
  FailSecondRowReadings(gpu, kDamagedRow);
  snapshot.incomplete_reasons.push_back(fmt::format("the row of GPU {} is damaged and could not be read: '{}'",
                                                    gpu.index, Excerpt(row)));
  snapshot.gpus.push_back(std::move(gpu));
}

}  // namespace

bool LooksLikeTable(std::string_view line) {
  line = Trim(line);
  return StartsWith(line, "|") || StartsWith(line, "+-") || StartsWith(line, "+=");
}

Result<size_t> ParseTable(std::span<const std::string_view> lines, Snapshot& snapshot) {
  TablePart part = TablePart::kGpus;
  bool second_row_next = false;  // the previous row was a GPU's first row (that GPU is gpus.back())
  bool gpu_rows = false;         // past the column headings' ===== line: rows describe GPUs
  bool block_start = false;      // the previous line was a border: the next row starts a GPU's block
  std::unordered_map<uint32_t, size_t> gpu_by_index;  // filled when the process table starts
  std::string_view last_table_line;                  // every box ends with a whole border line, +---+
  size_t recognised = 0;

  for (std::string_view line : lines) {
    const std::string_view row = Trim(line);
    if (LooksLikeTable(row)) last_table_line = row;
    const bool border = StartsWith(row, "+-") || StartsWith(row, "+=") || StartsWith(row, "|=");
    if (border) {
      gpu_rows = gpu_rows || StartsWith(row, "|=");
      block_start = true;
      second_row_next = false;
      continue;
    }
    const bool starts_block = std::exchange(block_start, false);
    if (row.empty() || row.front() != '|') {
      second_row_next = false;
      // The time nvidia-smi prints above its table.
      if (auto time = ParseSmiTimestamp(row)) {
        snapshot.taken_at = *time;
        ++recognised;
      }
      continue;
    }
    if (row.find("NVIDIA-SMI") != std::string_view::npos && row.find("Driver Version:") != std::string_view::npos) {
      ApplyHeader(row, snapshot);
      ++recognised;
      continue;
    }
    const std::vector<std::string_view> cells = Cells(row);
    const std::string_view first_cell = cells.empty() ? std::string_view() : Trim(cells[0]);
    if (StartsWith(first_cell, "Processes:")) {
      // A process table lists every process; GPUs without a row run none.
      part = TablePart::kProcesses;
      for (size_t position = 0; position < snapshot.gpus.size(); ++position) {
        snapshot.gpus[position].processes = Field<std::vector<ProcessInfo>>::Value({});
        gpu_by_index.emplace(snapshot.gpus[position].index, position);
      }
      ++recognised;
      continue;
    }
    if (StartsWith(first_cell, "MIG devices:")) {
      part = TablePart::kMigDevices;
      continue;
    }
    switch (part) {
      case TablePart::kGpus:
        if (second_row_next) {
          second_row_next = false;
          if (ApplySecondRow(cells, snapshot.gpus.back())) {
            ++recognised;
            continue;
          }
          if (GpuSnapshot next; !ApplyFirstRow(cells, next)) {
            GpuSnapshot& gpu = snapshot.gpus.back();
            snapshot.incomplete_reasons.push_back(fmt::format(
                "the second row of GPU {} is damaged and could not be read: '{}'", gpu.index, Excerpt(row)));
            FailSecondRowReadings(gpu, kDamagedRow);
            continue;
          }
        }
        if (GpuSnapshot gpu; ApplyFirstRow(cells, gpu)) {
          if (snapshot.gpus.size() == kMaxGpus) return TooManyGpus();
          snapshot.gpus.push_back(std::move(gpu));
          second_row_next = true;
          ++recognised;
        } else if (gpu_rows && starts_block) {
          if (snapshot.gpus.size() == kMaxGpus) return TooManyGpus();
          AddDamagedGpu(row, snapshot);
          second_row_next = true;  // its readings row may still be whole
        }
        break;
      case TablePart::kProcesses:
        if (cells.size() == 1 &&
            (ApplyProcessRow(cells[0], gpu_by_index, snapshot) || first_cell == "No running processes found")) {
          ++recognised;
        }
        break;
      case TablePart::kMigDevices:
        break;
    }
  }
  if (!last_table_line.empty() && !(StartsWith(last_table_line, "+") && EndsWith(last_table_line, "+"))) {
    snapshot.incomplete_reasons.push_back("the table ends inside a box, before its closing border line");
  }
  return recognised;
}

}  // namespace gpudoctor::smi
