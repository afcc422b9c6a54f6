// `nvidia-smi -q`: indented "Key : Value" lines under section titles, one
// "GPU 00000000:2D:00.0" block per GPU after a few report-wide lines.
//
//   ==============NVSMI LOG==============
//   Driver Version                            : 465.27
//   GPU 00000000:2D:00.0
//       Temperature
//           GPU Current Temp                  : 56 C     <- "temperature/gpu current temp"

#include <re2/re2.h>

#include <optional>
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

// nvidia-smi nests four sections deep; a deeper path is not one of its readings.
constexpr size_t kMaxSectionDepth = 8;

struct KeyValue {
  std::string_view key;
  std::string_view value;
};

// Splits "Driver Version      : 465.27". The separator is the first " :"
// followed by a space or the end, so values may hold colons ("12:00:01").
std::optional<KeyValue> SplitKeyValue(std::string_view body) {
  for (size_t at = body.find(" :"); at != std::string_view::npos; at = body.find(" :", at + 1)) {
    const size_t after = at + 2;
    if (after == body.size() || body[after] == ' ') {
      std::string_view key = Trim(body.substr(0, at));
      if (key.empty()) return std::nullopt;
      return KeyValue{key, Trim(body.substr(after))};
    }
  }
  return std::nullopt;
}

std::optional<std::string> GpuHeaderBusId(std::string_view body) {
  static const RE2 kGpuHeader(R"(GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]))");
  if (!StartsWith(body, "GPU ")) return std::nullopt;
  std::string bus_id;
  if (!RE2::FullMatch(Piece(body), kGpuHeader, &bus_id)) return std::nullopt;
  return bus_id;
}

bool IsBanner(std::string_view body) { return StartsWith(body, "===") && ContainsIgnoreCase(body, "NVSMI LOG"); }

size_t IndentOf(std::string_view line) {
  size_t indent = 0;
  for (char c : line) {
    if (c == ' ') indent += 1;
    else if (c == '\t') indent += 4;
    else break;
  }
  return indent;
}

// Report-wide lines before the GPU blocks (and in `nvidia-smi --version`).
bool ApplyReportReading(const std::string& key, std::string_view value, Snapshot& snapshot) {
  if (key == "timestamp") {
    if (auto time = ParseSmiTimestamp(value)) snapshot.taken_at = *time;
  } else if (key == "driver version") {
    snapshot.driver_version = TextField(value);
  } else if (key == "cuda version") {
    if (auto version = ParseCudaVersion(value)) snapshot.cuda_driver_version = Field<int32_t>::Value(*version);
  } else if (key == "attached gpus") {
    snapshot.device_count = NumberField<uint32_t>(value);
  } else if (key == "nvml version") {
    snapshot.nvml_version = TextField(value);
  } else {
    return false;
  }
  return true;
}

struct Section {
  size_t indent = 0;
  std::string name;  // lower case
};

// What the top level of a GPU block held, to tell a whole one from a cut one:
// nvidia-smi -q opens each GPU with Product Name and always prints its
// Processes section ("Processes : None" when there are none) near the end.
// -d excerpts print neither.
struct GpuBlockShape {
  bool starts_whole = false;  // Product Name seen
  bool has_processes = false;

  void Add(std::string_view top_level_name) {
    starts_whole |= top_level_name == "product name";
    has_processes |= top_level_name == "processes";
  }
  bool CutShort() const { return starts_whole && !has_processes; }
};

std::string SectionPath(const std::vector<Section>& sections, std::string_view key) {
  std::string path;
  for (const Section& section : sections) {
    path += section.name;
    path += '/';
  }
  path += ToLower(key);
  return path;
}

}  // namespace

bool LooksLikeQueryText(std::string_view line) {
  std::string_view body = Trim(line);
  return IsBanner(body) || GpuHeaderBusId(body).has_value() || SplitKeyValue(body).has_value();
}

Result<size_t> ParseQueryText(std::span<const std::string_view> lines, Snapshot& snapshot) {
  std::vector<Section> sections;  // the titles the current line is nested in
  std::optional<size_t> current;  // the GPU whose block we are in
  GpuSnapshot unheaded;           // readings of an excerpt without a GPU header
  bool unheaded_used = false;
  GpuBlockShape last_block;       // of the GPU whose block we are in
  size_t recognised = 0;

  for (std::string_view line : lines) {
    const size_t indent = IndentOf(line);
    const std::string_view body = Trim(line);
    if (IsBanner(body)) {
      ++recognised;
      continue;
    }
    if (auto bus_id = GpuHeaderBusId(body)) {
      if (snapshot.gpus.size() == kMaxGpus) return TooManyGpus();
      GpuSnapshot& gpu = snapshot.gpus.emplace_back();
      gpu.pci_bus_id = PciBusIdField(*bus_id);
      current = snapshot.gpus.size() - 1;
      sections.clear();
      last_block = {};
      ++recognised;
      continue;
    }
    while (!sections.empty() && sections.back().indent >= indent) sections.pop_back();
    const std::optional<KeyValue> pair = SplitKeyValue(body);
    if (current && sections.empty()) last_block.Add(ToLower(pair ? pair->key : body));
    if (!pair) {
      sections.push_back({indent, ToLower(body)});
      continue;
    }
    if (sections.size() > kMaxSectionDepth) continue;
    if (sections.empty() && ApplyReportReading(ToLower(pair->key), pair->value, snapshot)) {
      ++recognised;
      continue;
    }
    GpuSnapshot& gpu = current ? snapshot.gpus[*current] : unheaded;
    if (ApplyGpuReading(ReadingNaming::kQueryText, SectionPath(sections, pair->key), pair->value, gpu)) {
      ++recognised;
      unheaded_used |= !current.has_value();
    }
  }

  if (current && last_block.CutShort())
    snapshot.incomplete_reasons.push_back("the report of its last GPU ends before its Processes section");
  if (unheaded_used) {
    if (snapshot.gpus.size() == kMaxGpus) return TooManyGpus();
    snapshot.gpus.insert(snapshot.gpus.begin(), std::move(unheaded));
  }
  // nvidia-smi prints GPUs in index order and does not print the index.
  for (size_t position = 0; position < snapshot.gpus.size(); ++position) {
    snapshot.gpus[position].index = static_cast<uint32_t>(position);
  }
  return recognised;
}

}  // namespace gpudoctor::smi
