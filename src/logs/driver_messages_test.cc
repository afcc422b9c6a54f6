// Every error-level message a release NVIDIA driver prints, as extracted from
// its source (testdata/driver_messages, README.md there), must become an event
// when fed through the real parser, or be listed as benign in data/events.toml
// [driver]. Each row's format and prefix template are filled with plausible
// values, the way the driver fills them, and the line read as a dmesg line.
//
// Coverage is measured over the rows of the GPU's RM (src/nvidia/src/kernel/gpu),
// NVLink and NVSwitch sources: the share of rows that give an event, and the
// share that give an event of a specific kind (a catalog pattern's, or a
// subsystem's own kind such as nvlink_error; not the generic driver_error).
// The floors below are the measured figures, so they cannot regress.
// Set GPUDOCTOR_PRINT_DRIVER_ROWS=1 to list the rows that give no event or
// only the generic one.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/text.h"
#include "logs/driver_classifier.h"
#include "logs/log_parser.h"

namespace gpudoctor {
namespace {

const std::string kMessages =
    std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/driver_messages/open-gpu-kernel-modules.tsv";

// The measured figures (see docs/events.md, "Coverage of the driver's messages").
constexpr double kScopeSpecificFloor = 0.988;  // share of in-scope rows that give a specific event
constexpr double kFolderAgreementFloor = 0.90;  // function prefix and source folder name the same subsystem
constexpr size_t kUntaggedCeiling = 153;         // rows whose line names no driver tag at all, listed benign

struct Row {
  std::string level, path, line, function, format, emitter, code, visibility, prefix;
};

// The TSV's escapes: \\ \t \n \r.
std::string Unescape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out.push_back(text[i]);
      continue;
    }
    char next = text[++i];
    out.push_back(next == 'n' ? '\n' : next == 't' ? '\t' : next == 'r' ? '\r' : next);
  }
  return out;
}

std::vector<Row> LoadRows() {
  std::vector<Row> rows;
  std::ifstream in(kMessages);
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> cells;
    for (std::string_view cell : Split(line, '\t')) cells.emplace_back(cell);
    if (cells.size() != 9) continue;
    rows.push_back(Row{cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7], cells[8]});
  }
  return rows;
}

// Fills printf conversions the way the driver's values would: numbers as 1
// (zero-padded to their width, so a bus id reads 0001:01:01.1), strings as
// "value", pointers as 0x1.
std::string FillConversions(std::string_view format, std::string_view string_value = "value") {
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    size_t j = i + 1;
    if (j < format.size() && format[j] == '%') {
      out.push_back('%');
      i = j;
      continue;
    }
    while (j < format.size() && std::string_view("-+ #0").find(format[j]) != std::string_view::npos) ++j;
    size_t width = 0;
    while (j < format.size() && (std::isdigit(static_cast<unsigned char>(format[j])) || format[j] == '*')) {
      if (format[j] != '*') width = width * 10 + static_cast<size_t>(format[j] - '0');
      ++j;
    }
    if (j < format.size() && format[j] == '.') {
      ++j;
      while (j < format.size() && (std::isdigit(static_cast<unsigned char>(format[j])) || format[j] == '*')) ++j;
    }
    while (j < format.size() && std::string_view("hlzjtLq").find(format[j]) != std::string_view::npos) ++j;
    if (j >= format.size()) {
      out.append(format.substr(i));
      break;
    }
    const char conversion = format[j];
    std::string value;
    switch (conversion) {
      case 's': value = string_value; break;
      case 'p': value = "0x1"; break;
      case 'c': value = "c"; break;
      case 'f': case 'g': case 'e': case 'E': value = "1.0"; break;
      default: value = "1"; break;
    }
    if (conversion != 's' && value.size() < width) value.insert(0, width - value.size(), '0');
    out += value;
    i = j;
  }
  return out;
}

void ReplaceAll(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// The kernel-log lines a row prints: its prefix template and format, filled.
std::vector<std::string> LinesOf(const Row& row) {
  const std::string code = !row.code.empty() && std::isdigit(static_cast<unsigned char>(row.code[0])) ? row.code : "13";
  std::string prefix = row.prefix;
  ReplaceAll(prefix, "<gpu?>", "GPU0 ");
  ReplaceAll(prefix, "<function>", row.function.empty() ? "unknownFunction" : row.function);
  ReplaceAll(prefix, "<mig?>", "");
  ReplaceAll(prefix, "<pid?>", "pid=1234, name=python, ");
  ReplaceAll(prefix, "<drm>", "[drm:nv_drm_probe [nvidia_drm]] *ERROR* ");
  ReplaceAll(prefix, "<crashcat>", row.code.empty() ? "GSP " : "NVRM: Xid (PCI:%04x:%02x:%02x): " + code + ", GSP ");
  ReplaceAll(prefix, "nvidia-%s", "nvidia-nvswitch0");
  ReplaceAll(prefix, "%05d", std::string(5 - std::min<size_t>(5, code.size()), '0') + code);
  ReplaceAll(prefix, "): %d, ", "): " + code + ", ");
  // The NVSwitch glue starts its messages with the device's name.
  const bool switch_glue = row.path.find("linux_nvswitch") != std::string::npos && StartsWith(row.format, "%s");
  const std::string text =
      FillConversions(prefix) + FillConversions(Unescape(row.format), switch_glue ? "nvidia-nvswitch0" : "value");
  std::vector<std::string> lines;
  for (std::string_view piece : Split(text, '\n')) {
    while (!piece.empty() && (piece.back() == '\r' || piece.back() == ' ')) piece.remove_suffix(1);
    if (!Trim(piece).empty()) lines.emplace_back(piece);
  }
  return lines;
}

bool InScope(const Row& row) {
  return StartsWith(row.path, "src/nvidia/src/kernel/gpu/") || StartsWith(row.path, "src/common/nvswitch/") ||
         StartsWith(row.path, "src/common/nvlink/");
}

enum class Outcome { kSpecific, kGeneric, kBenign, kUntaggedBenign, kSilent, kNone };

struct Tally {
  size_t rows = 0;
  std::map<Outcome, size_t> by_outcome;
  double Share(std::initializer_list<Outcome> outcomes) const {
    size_t count = 0;
    for (Outcome outcome : outcomes) {
      auto it = by_outcome.find(outcome);
      if (it != by_outcome.end()) count += it->second;
    }
    return rows ? static_cast<double>(count) / static_cast<double>(rows) : 0;
  }
};

TEST(DriverMessages, EveryReleaseErrorGivesAnEventOrIsListedBenign) {
  const std::vector<Row> rows = LoadRows();
  ASSERT_GT(rows.size(), 7000u) << "cannot read " << kMessages;
  const auto matcher = LineMatcher::Builtin();
  const DriverClassifier& driver = matcher->driver();
  const std::string& generic = driver.tables().generic_kind;
  const bool print = std::getenv("GPUDOCTOR_PRINT_DRIVER_ROWS") != nullptr;

  Tally scope, all;
  size_t folder_rows = 0, folder_agree = 0;
  std::vector<std::string> failures;
  for (const Row& row : rows) {
    if (row.visibility != "default" || row.level != "error") continue;
    const std::vector<std::string> lines = LinesOf(row);
    Outcome outcome = Outcome::kNone;
    if (lines.empty()) {
      outcome = Outcome::kSilent;  // prints a line break or white space only
    } else {
      std::string text;
      for (const std::string& line : lines) text += "[ 1234.567890] " + line + "\n";
      bool specific = false, any = false;
      for (const LogEvent& event : ParseText(text)) {
        any = true;
        specific = specific || event.kind != generic;
      }
      if (any) {
        outcome = specific ? Outcome::kSpecific : Outcome::kGeneric;
      } else {
        // No event: the record's first line must be listed benign (its other lines belong to it).
        const std::string& line = lines.front();
        std::optional<DriverLine> split = SplitDriverLine(Trim(line), {});
        const bool tagged = split.has_value() || line.find("nvidia-") != std::string::npos;
        // The row's function, which a line shows only after "NVRM: [GPUn ]"; for a
        // message written in a wrapper macro, the wrapper ("portSyncMutexAcquire>portDbgPrintf").
        std::string_view function = row.function;
        if (function.empty()) function = std::string_view(row.emitter).substr(0, row.emitter.find('>'));
        const bool function_shown = split && !split->function.empty();
        if (function_shown) function = split->function;
        std::string_view body = split ? split->text : Trim(line);
        if (driver.FindBenign(function, body, function_shown) != nullptr) {
          outcome = tagged ? Outcome::kBenign : Outcome::kUntaggedBenign;
        }
      }
    }
    for (Tally* tally : {&all, InScope(row) ? &scope : nullptr}) {
      if (!tally) continue;
      ++tally->rows;
      ++tally->by_outcome[outcome];
    }
    if (outcome == Outcome::kNone) {
      failures.push_back(row.path + ":" + row.line + " " + row.function + ": " + (lines.empty() ? "" : lines[0]));
    }
    if (print && (outcome == Outcome::kNone || (outcome == Outcome::kGeneric && InScope(row)))) {
      std::cout << (outcome == Outcome::kNone ? "NONE    " : "GENERIC ") << row.path << ":" << row.line << " "
                << row.function << ": " << (lines.empty() ? "" : lines[0]) << "\n";
    }
    // The function prefixes against the source folders, for the RM's own messages.
    if (InScope(row) && !row.function.empty() && StartsWith(row.prefix, "NVRM: <gpu?><function>")) {
      ++folder_rows;
      const DriverSubsystem* by_function = driver.SubsystemOfFunction(row.function);
      const DriverSubsystem* by_folder = driver.SubsystemOfFolder(row.path);
      if (by_function && by_function == by_folder) ++folder_agree;
    }
  }

  const double folder_share = folder_rows ? static_cast<double>(folder_agree) / static_cast<double>(folder_rows) : 0;
  std::cout << "driver messages, release error rows: " << all.rows << "; specific "
            << all.by_outcome[Outcome::kSpecific] << ", generic " << all.by_outcome[Outcome::kGeneric] << ", benign " << all.by_outcome[Outcome::kBenign]
            << ", untagged (benign) " << all.by_outcome[Outcome::kUntaggedBenign] << ", no text "
            << all.by_outcome[Outcome::kSilent] << ", unclassified " << all.by_outcome[Outcome::kNone] << "\n"
            << "in scope (RM gpu/, NVLink, NVSwitch): " << scope.rows << " rows; event "
            << 100 * scope.Share({Outcome::kSpecific, Outcome::kGeneric}) << " %, specific "
            << 100 * scope.Share({Outcome::kSpecific}) << " %, benign " << scope.by_outcome[Outcome::kBenign]
            << ", unclassified " << scope.by_outcome[Outcome::kNone] << "\n"
            << "function prefix agrees with source folder: " << folder_agree << " of " << folder_rows << " ("
            << 100 * folder_share << " %)\n";

  EXPECT_TRUE(failures.empty()) << failures.size() << " rows give no event and are not listed benign, first: "
                                << failures.front();
  EXPECT_GE(scope.Share({Outcome::kSpecific}), kScopeSpecificFloor);
  EXPECT_GE(folder_share, kFolderAgreementFloor);
  EXPECT_LE(all.by_outcome[Outcome::kUntaggedBenign], kUntaggedCeiling);
}

}  // namespace
}  // namespace gpudoctor
