#include "smi/nvidia_smi.h"

#include <re2/re2.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "common/input_file.h"
#include "common/text.h"
#include "smi/smi_formats.h"
#include "smi/smi_messages.h"

namespace gpudoctor {
namespace {

using smi::CsvCommand;
using smi::SmiMessage;

// No nvidia-smi line comes near this; longer lines are skipped, not scanned.
constexpr size_t kMaxLineBytes = 64 * 1024;

Error NotRecognised(std::string_view why) {
  return Error{std::string(kNotNvidiaSmiOutput) + std::string(why)};
}

// The input sorted into what the format parsers read and what they do not.
struct InputLines {
  std::vector<std::string_view> report;    // without comments, commands, messages, blank lines
  std::vector<std::string_view> commands;  // pasted "$ nvidia-smi ..." lines
  std::vector<SmiMessage> messages;
  std::optional<std::string_view> first_report_line;  // even when over long (one-line XML)
  size_t overlong_lines = 0;
};

// "$ nvidia-smi -q", "[root@node7 ~]# nvidia-smi", "user@host:~$ sudo nvidia-smi ..."
bool IsCommandLine(std::string_view body) {
  static const RE2 kCommand(
      R"((?:(?:\[[^\]]*\]|[\w.@:~/-]*)\s?[$#>]\s*)?(?:sudo\s+)?(?:\S*/)?nvidia-smi(?:\s.*)?)");
  static const RE2 kBarePrompt(R"(\[[^\]]*\][$#]\s*)");
  if (StartsWith(body, "$")) return true;
  if (body.find("nvidia-smi") == std::string_view::npos && !StartsWith(body, "[")) return false;
  re2::StringPiece piece(body.data(), body.size());
  return RE2::FullMatch(piece, kCommand) || RE2::FullMatch(piece, kBarePrompt);
}

InputLines SortLines(std::string_view text) {
  InputLines input;
  for (std::string_view line : Split(text, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string_view body = Trim(line);
    if (body.empty()) continue;
    if (line.size() > kMaxLineBytes) {
      ++input.overlong_lines;
      if (!input.first_report_line) input.first_report_line = body;
      continue;
    }
    // '#' starts our corpus headers, and a root shell's prompt.
    if (body.front() == '#') {
      if (IsCommandLine(body)) input.commands.push_back(body);
      continue;
    }
    if (auto message = smi::MatchSmiMessage(body)) {
      input.messages.push_back(std::move(*message));
      continue;
    }
    if (IsCommandLine(body)) {
      input.commands.push_back(body);
      continue;
    }
    if (!input.first_report_line) input.first_report_line = body;
    input.report.push_back(line);
  }
  return input;
}

std::optional<CsvCommand> LastCsvCommand(const std::vector<std::string_view>& commands) {
  for (auto command = commands.rbegin(); command != commands.rend(); ++command) {
    if (auto csv = smi::ParseCsvCommand(*command)) return csv;
  }
  return std::nullopt;
}

enum class Format { kXml, kTable, kDebugDumpList, kTopology, kGpuList, kCsv, kQueryText, kHeaderlessCsv, kNone };

Format DetectFormat(const InputLines& input, const std::optional<CsvCommand>& csv_command) {
  const auto& report = input.report;
  auto any_line = [&](auto predicate) { return std::any_of(report.begin(), report.end(), predicate); };
  if (input.first_report_line && StartsWith(*input.first_report_line, "<")) return Format::kXml;
  if (any_line(smi::LooksLikeTable)) return Format::kTable;
  if (any_line(smi::LooksLikeDebugDumpList)) return Format::kDebugDumpList;
  if (any_line(smi::LooksLikeTopology)) return Format::kTopology;
  if (any_line(smi::LooksLikeGpuList)) return Format::kGpuList;
  if (csv_command || (!report.empty() && smi::LooksLikeCsvHeader(report.front()))) return Format::kCsv;
  if (any_line(smi::LooksLikeQueryText)) return Format::kQueryText;
  if (smi::LooksLikeCsvRows(report)) return Format::kHeaderlessCsv;
  return Format::kNone;
}

std::string NothingFound(const InputLines& input) {
  std::string why =
      "found no nvidia-smi table, -q report, XML log, --query-gpu CSV, -L, nvlink -s or -e list, topo -m matrix, "
      "nvidia-debugdump --list or nvidia-smi message";
  if (input.overlong_lines > 0) {
    why += " (skipped " + std::to_string(input.overlong_lines) + " line(s) longer than " +
           std::to_string(kMaxLineBytes) + " bytes)";
  }
  return why;
}

// nvidia-smi says how many GPUs are attached (Attached GPUs, <attached_gpus>,
// the CSV count column); a capture describing fewer ended early, or was
// taken for some GPUs only (-i), and cannot vouch for the others.
void NoteMissingGpus(Snapshot& snapshot) {
  if (!snapshot.device_count.has_value() || snapshot.device_count.value() <= snapshot.gpus.size()) return;
  snapshot.incomplete_reasons.push_back("it names " + std::to_string(snapshot.device_count.value()) +
                                        " attached GPUs but describes " + std::to_string(snapshot.gpus.size()));
}

// nvidia-smi underlines or bolds some headers when it writes to a terminal (`topo -m`), and a capture
// taken with `script` or copied from a colour terminal keeps the escape sequences: CSI sequences
// (ESC '[', parameter and intermediate bytes, a final byte) and two-byte escapes are dropped.
std::string WithoutEscapeSequences(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\x1b') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '[') {
      size_t end = i + 2;
      while (end < text.size() && text[end] >= 0x20 && text[end] <= 0x3f) ++end;  // parameters, intermediates
      if (end < text.size() && text[end] >= 0x40 && text[end] <= 0x7e) i = end;    // the final byte
      else i = end - 1;  // cut short: what came after the escape stays
    } else if (i + 1 < text.size() && text[i + 1] >= 0x40 && text[i + 1] <= 0x5f) {
      ++i;
    }
  }
  return out;
}

}  // namespace

Error smi::TooManyGpus() {
  return Error{"more than " + std::to_string(smi::kMaxGpus) +
               " GPUs in one capture: a snapshot describes one host, so give each host's output its own file"};
}

Result<Snapshot> ParseNvidiaSmi(std::string_view text, std::string_view source_name) {
  if (text.find('\0') != std::string_view::npos) return NotRecognised("it contains NUL bytes (binary data)");
  if (StartsWith(text, "\xEF\xBB\xBF")) text.remove_prefix(3);  // UTF-8 byte order mark
  if (Trim(text).empty()) return NotRecognised("the input is empty");
  std::string unescaped;
  if (text.find('\x1b') != std::string_view::npos) {
    unescaped = WithoutEscapeSequences(text);
    text = unescaped;
  }

  Snapshot snapshot;
  snapshot.source = "nvidia-smi:" + std::string(source_name);
  const InputLines input = SortLines(text);
  const std::optional<CsvCommand> csv_command = LastCsvCommand(input.commands);

  Result<size_t> recognised = size_t{0};
  switch (DetectFormat(input, csv_command)) {
    case Format::kXml: {
      const size_t xml_start = static_cast<size_t>(input.first_report_line->data() - text.data());
      recognised = smi::ParseXmlLog(text.substr(xml_start), snapshot);
      break;
    }
    case Format::kTable:
      recognised = smi::ParseTable(input.report, snapshot);
      break;
    case Format::kDebugDumpList:
      recognised = smi::ParseDebugDumpList(input.report, snapshot);
      break;
    case Format::kTopology:
      recognised = smi::ParseTopology(input.report, snapshot);
      break;
    case Format::kGpuList:
      recognised = smi::ParseGpuList(input.report, snapshot);
      break;
    case Format::kCsv:
      recognised = smi::ParseQueryCsv(input.report, csv_command, snapshot);
      break;
    case Format::kHeaderlessCsv:
      // Guessing which column is which could put a temperature into a fan speed.
      recognised = smi::ParseQueryCsv(input.report, std::nullopt, snapshot);
      break;
    case Format::kQueryText:
      recognised = smi::ParseQueryText(input.report, snapshot);
      break;
    case Format::kNone:
      break;
  }
  if (!recognised) return recognised.error();
  if (Status applied = smi::ApplySmiMessages(input.messages, snapshot); !applied) return applied.error();

  if (*recognised + input.messages.size() == 0) return NotRecognised(NothingFound(input));
  NoteMissingGpus(snapshot);
  return snapshot;
}

Result<Snapshot> ReadNvidiaSmiFile(const std::string& path) {
  auto text = ReadInputFile(path, kMaxNvidiaSmiFileBytes);
  if (!text) return text.error();
  Result<Snapshot> snapshot = ParseNvidiaSmi(*text, path);
  if (!snapshot) return Error{path + ": " + snapshot.error().message};
  return snapshot;
}

}  // namespace gpudoctor
