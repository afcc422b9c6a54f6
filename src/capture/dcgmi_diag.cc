// `dcgmi diag` reports: see dcgmi.h.

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "capture/dcgmi.h"
#include "capture/dcgmi_rows.h"
#include "common/re2_view.h"
#include "common/text.h"

namespace gpudoctor::dcgmi {
namespace {

// DCGM's message column: one space, then this many characters of text, wrapped inside words.
constexpr size_t kMessageWidth = 45;

// The text of a message row as printed, for joining a message DCGM wrapped inside words.
std::string_view ChunkOf(const TableRow& row) {
  std::string_view chunk = row.cell.empty() ? row.cell : row.cell.substr(1);
  return chunk.substr(0, kMessageWidth);
}

// Collapses the white space runs of a joined message.
std::string Tidy(std::string_view text) {
  std::string tidy;
  bool space = false;
  for (char c : Trim(text)) {
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !tidy.empty()) tidy += ' ';
    space = false;
    tidy += c;
  }
  return tidy;
}

bool IsMessageRow(std::string_view name) { return name == "Warning" || name == "Info" || name == "Error"; }

bool IsMetadataRow(std::string_view name) {
  return name == "Diagnostic" || name == "DCGM Version" || name == "Driver Version Detected" ||
         name == "GPU Device IDs Detected" || name == "Number of GPUs Detected";
}

// The gpudoctor test that tries what a DCGM test tries, or DCGM's name as a word ("Page Retirement/Row Remap"
// -> "page_retirement_row_remap").
std::string TestNamed(std::string_view dcgm_name) {
  const std::string name = ToLower(dcgm_name);
  if (name == "gpu memory" || name == "memory" || name == "memtest" || name == "memory bandwidth" ||
      name == "memory_bandwidth")
    return "memtest";
  if (name == "diagnostic" || name == "targeted stress" || name == "targeted_stress" || name == "targeted power" ||
      name == "targeted_power" || name == "sm stress" || name == "sm_stress" || name == "pulse test" ||
      name == "pulse_test" || name == "eud")
    return "burn";
  if (name == "pcie") return "pcie";
  // The deployment checks of the software set-up (4.x runs them as one plugin, "software"); the checks of pending
  // retired pages or row remaps and of the inforom keep their own names, as they are about the board.
  if (name == "software" || name == "denylist" || name == "blacklist" || name == "nvml library" ||
      name == "cuda main library" || name == "cuda toolkit library" || name == "cuda toolkit libraries" ||
      name == "permissions and os blocks" || name == "permissions and os-related blocks" ||
      name == "persistence mode" || name == "environment variables" || name == "environmental variables" ||
      name == "graphics processes")
    return "software";
  std::string word;
  for (char c : name) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (alnum) word += c;
    else if (!word.empty() && word.back() != '_') word += '_';
  }
  while (!word.empty() && word.back() == '_') word.pop_back();
  return word.empty() ? "unnamed" : word;  // a name of no letters or digits (damaged input)
}

// The GPUs a result names: "GPU: 0", "GPUs: 1, 2, 3"; empty for "All" or none.
std::vector<uint32_t> GpusListed(std::string_view text) {
  std::vector<uint32_t> gpus;
  static const RE2 kList(R"(GPUs?:\s*([0-9, ]+))");
  std::string list;
  if (!RE2::PartialMatch(Piece(text), kList, &list)) return gpus;
  for (std::string_view number : Split(list, ','))
    if (auto gpu = ParseInt<uint32_t>(Trim(number))) gpus.push_back(*gpu);
  return gpus;
}

// The GPUs a message is about: "GPU 0 Thermal violations ...", "GPU 3 has ...".
std::set<uint32_t> GpusMentioned(std::string_view text) {
  std::set<uint32_t> gpus;
  static const RE2 kGpu(R"(\bGPU ?(\d+))");
  re2::StringPiece input = Piece(text);
  uint32_t gpu = 0;
  while (RE2::FindAndConsume(&input, kGpu, &gpu)) gpus.insert(gpu);
  return gpus;
}

enum class Outcome { kPass, kFail, kWarn, kSkip };

// "Pass" as dcgmi prints it, "PASS" as its diagnostic backend writes it.
std::optional<Outcome> OutcomeOf(std::string_view word) {
  if (EqualsIgnoreCase(word, "Pass")) return Outcome::kPass;
  if (EqualsIgnoreCase(word, "Fail")) return Outcome::kFail;
  if (EqualsIgnoreCase(word, "Warn") || EqualsIgnoreCase(word, "Warning")) return Outcome::kWarn;
  if (EqualsIgnoreCase(word, "Skip")) return Outcome::kSkip;
  return std::nullopt;
}

// "Fail - GPU: 0", "Pass - All", "Pass", "GPU0: Fail" (4.x).
struct GpuResult {
  Outcome outcome;
  std::vector<uint32_t> gpus;  // empty: every GPU
};

std::optional<GpuResult> ResultOf(std::string_view value) {
  static const RE2 kPerGpu(R"(GPU ?(\d+): (\w+).*)");
  static const RE2 kListed(R"((\w+)(?:\s+-\s+(.*))?)");
  uint32_t gpu = 0;
  std::string word, rest;
  if (RE2::FullMatch(Piece(value), kPerGpu, &gpu, &word)) {
    if (auto outcome = OutcomeOf(word)) return GpuResult{*outcome, {gpu}};
    return std::nullopt;
  }
  if (!RE2::FullMatch(Piece(value), kListed, &word, &rest)) return std::nullopt;
  auto outcome = OutcomeOf(word);
  if (!outcome) return std::nullopt;
  return GpuResult{*outcome, GpusListed(rest)};
}

struct TestResult {
  std::string dcgm_name;
  Outcome outcome;
  std::vector<uint32_t> gpus;  // empty: every GPU
  std::vector<std::string> messages;
};

struct Reading {
  std::vector<TestResult> results;
  std::set<uint32_t> gpus_named;
  size_t device_ids = 0;   // "GPU Device IDs Detected": how many GPUs the run had
  std::string run_level;   // "-r 3" from a pasted command line
};

void AddMessage(Reading& reading, std::string_view section, std::string message) {
  if (message.empty()) return;
  for (uint32_t gpu : GpusMentioned(message)) reading.gpus_named.insert(gpu);
  if (reading.results.empty()) {
    // An excerpt that starts with an error row: the error is the section's own finding.
    reading.results.push_back(TestResult{.dcgm_name = section.empty() ? "deployment" : std::string(section),
                                         .outcome = Outcome::kFail});
  }
  TestResult& test = reading.results.back();
  if (StartsWith(message, "Error:") && test.outcome == Outcome::kPass) test.outcome = Outcome::kFail;
  test.messages.push_back(std::move(message));
}

// "-r 3" from a pasted command line ("$ dcgmi diag -r 3 -j"), the last one; empty when none.
std::string CommandRunLevel(std::string_view text) {
  static const RE2 kCommand(R"(.*dcgmi diag\b.*(-r\s*\d+|--run\s*\d+).*)");
  std::string level;
  for (std::string_view line : Split(text, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string found;
    if (!StartsWith(Trim(line), "#") && RE2::FullMatch(Piece(line), kCommand, &found)) level = found;
  }
  return level;
}

Reading Read(std::string_view text) {
  static const RE2 kSection(R"([|+]-+\s+(\w[\w ]*?)\s+-+[|+].*)");
  Reading reading;
  std::string section;
  std::string message;       // a Warning/Info/Error being joined
  std::string message_kind;  // its row name
  auto flush = [&] {
    if (!message.empty()) AddMessage(reading, section, (message_kind == "Error" ? "Error: " : "") + Tidy(message));
    message.clear();
  };
  for (std::string_view line : Split(text, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string name;
    if (RE2::FullMatch(Piece(Trim(line)), kSection, &name)) {
      flush();
      section = ToLower(name);
      continue;
    }
    std::optional<TableRow> row = TableRowOf(line);
    if (!row) {
      flush();
      continue;
    }
    if (row->name.empty()) {
      if (!message.empty()) {
        message += ChunkOf(*row);
        continue;
      }
      if (reading.results.empty()) continue;
      if (auto result = ResultOf(row->value)) {  // another GPU list of the test above
        TestResult& test = reading.results.back();
        reading.results.push_back(TestResult{.dcgm_name = test.dcgm_name, .outcome = result->outcome,
                                             .gpus = result->gpus});
        for (uint32_t gpu : result->gpus) reading.gpus_named.insert(gpu);
      }
      continue;
    }
    flush();
    if (IsMessageRow(row->name)) {
      message_kind = std::string(row->name);
      message = std::string(ChunkOf(*row));
      continue;
    }
    if (row->name == "GPU Device IDs Detected") {
      reading.device_ids = Split(row->value, ',').size();
      continue;
    }
    if (IsMetadataRow(row->name)) continue;
    if (auto result = ResultOf(row->value)) {
      reading.results.push_back(TestResult{.dcgm_name = std::string(row->name), .outcome = result->outcome,
                                           .gpus = result->gpus});
      for (uint32_t gpu : result->gpus) reading.gpus_named.insert(gpu);
    } else if (row->value.empty()) {
      // 4.x: the test's name alone, its GPUs' results on the rows below.
      reading.results.push_back(TestResult{.dcgm_name = std::string(row->name), .outcome = Outcome::kPass});
    }
  }
  flush();
  return reading;
}

// The root keys of `dcgmi diag -j`'s document: DCGM 2.x and 3.x, then 4.x.
constexpr std::string_view kJsonRoots[] = {"DCGM GPU Diagnostic", "DCGM Diagnostic"};

bool HasJsonRoot(std::string_view text) {
  for (std::string_view root : kJsonRoots) {
    const size_t at = text.find(root);
    if (at != std::string_view::npos && at > 0 && text[at - 1] == '"' && at + root.size() < text.size() &&
        text[at + root.size()] == '"')
      return true;
  }
  return false;
}

// A message as dcgmi writes it in JSON: a string (2.x and 3.x info), an array of strings (4.x info), or an array
// of objects whose text is under "warning" ("warnings" in 3.3's deployment results).
void AddJsonMessages(const nlohmann::json& value, std::vector<std::string>& messages) {
  if (value.is_string()) {
    if (std::string text = Tidy(value.get<std::string>()); !text.empty()) messages.push_back(std::move(text));
  } else if (value.is_array()) {
    for (const nlohmann::json& item : value) AddJsonMessages(item, messages);
  } else if (value.is_object()) {
    for (const char* key : {"warning", "warnings"}) {
      if (auto it = value.find(key); it != value.end()) AddJsonMessages(*it, messages);
    }
  }
}

// A GPU index as dcgmi writes it: a number, or a string of one or (nvvs's own document) a list.
std::vector<uint32_t> JsonGpus(const nlohmann::json& value) {
  std::vector<uint32_t> gpus;
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() <= UINT32_MAX) gpus.push_back(static_cast<uint32_t>(value.get<uint64_t>()));
  } else if (value.is_string()) {
    const std::string& list = value.get_ref<const std::string&>();
    for (std::string_view number : Split(list, ','))
      if (auto gpu = ParseInt<uint32_t>(Trim(number))) gpus.push_back(*gpu);
  }
  return gpus;
}

// One diagnostic document: {ROOT: {"test_categories": [{"category", "tests": [{"name", "results": [...],
// "test_summary"}]}]}} beside 3.x's "GPU Device IDs" and 4.x's "entity_groups". A result names its GPU by
// "gpu_ids" (2.x to 3.2, a string), "gpu_id" (3.3) or "entity_id" with "entity_group" (4.x); a result that names
// none (a deployment check before 4.x) stands for every GPU. Results of other entities (4.x's CPUs) are left out.
void ReadJsonDocument(const nlohmann::json& document, Reading& reading, std::string& runtime_error) {
  const nlohmann::json* diagnostic = nullptr;
  for (std::string_view root : kJsonRoots) {
    if (auto it = document.find(root); it != document.end() && it->is_object()) diagnostic = &*it;
  }
  if (diagnostic == nullptr) return;
  if (std::string error = JsonString(*diagnostic, "runtime_error"); !error.empty()) runtime_error = error;
  if (auto ids = document.find("GPU Device IDs"); ids != document.end() && ids->is_array())
    reading.device_ids = std::max(reading.device_ids, ids->size());
  if (auto groups = document.find("entity_groups"); groups != document.end() && groups->is_array()) {
    for (const nlohmann::json& group : *groups) {
      if (!group.is_object() || JsonString(group, "entity_group") != "GPU") continue;
      auto entities = group.find("entities");
      if (entities == group.end() || !entities->is_array()) continue;
      for (const nlohmann::json& entity : *entities) {
        if (!entity.is_object()) continue;
        if (auto id = entity.find("entity_id"); id != entity.end())
          for (uint32_t gpu : JsonGpus(*id)) reading.gpus_named.insert(gpu);
      }
    }
  }
  auto categories = diagnostic->find("test_categories");
  if (categories == diagnostic->end() || !categories->is_array()) return;
  for (const nlohmann::json& category : *categories) {
    auto tests = category.is_object() ? category.find("tests") : category.end();
    if (!category.is_object() || tests == category.end() || !tests->is_array()) continue;
    for (const nlohmann::json& test : *tests) {
      if (!test.is_object()) continue;  // nvvs's own document has nulls between its tests
      const std::string name = JsonString(test, "name");
      if (name.empty()) continue;
      auto results = test.find("results");
      std::vector<const nlohmann::json*> entries;
      if (results != test.end() && results->is_array()) {
        for (const nlohmann::json& result : *results)
          if (result.is_object()) entries.push_back(&result);
      }
      // 4.x: a test's overall result, which stands alone only when no entity has a result of its own.
      if (auto summary = test.find("test_summary"); entries.empty() && summary != test.end() && summary->is_object())
        entries.push_back(&*summary);
      for (const nlohmann::json* result : entries) {
        auto outcome = OutcomeOf(JsonString(*result, "status"));
        if (!outcome) continue;
        if (auto group = result->find("entity_group");
            group != result->end() && group->is_string() && group->get<std::string>() != "GPU")
          continue;
        TestResult read{.dcgm_name = name, .outcome = *outcome};
        for (const char* key : {"entity_id", "gpu_id", "gpu_ids"}) {
          if (auto it = result->find(key); it != result->end()) read.gpus = JsonGpus(*it);
          if (!read.gpus.empty()) break;
        }
        for (const char* key : {"warnings", "info"}) {
          if (auto it = result->find(key); it != result->end()) AddJsonMessages(*it, read.messages);
        }
        for (uint32_t gpu : read.gpus) reading.gpus_named.insert(gpu);
        reading.results.push_back(std::move(read));
      }
    }
  }
}

// `dcgmi diag -j`, whole: the document, or `--iterations`' {"iterations": [document, ...]}, after whatever dcgmi
// printed before it. Nothing when the text holds no whole JSON document.
std::optional<Reading> ReadJsonWhole(std::string_view text, std::string& runtime_error) {
  const nlohmann::json document = JsonAfterText(text);
  if (!document.is_object()) return std::nullopt;
  Reading reading;
  if (auto iterations = document.find("iterations"); iterations != document.end() && iterations->is_array()) {
    for (const nlohmann::json& iteration : *iterations)
      if (iteration.is_object()) ReadJsonDocument(iteration, reading, runtime_error);
  } else {
    ReadJsonDocument(document, reading, runtime_error);
  }
  return reading;
}

// An excerpt of `dcgmi diag -j` (cut short, or with a poster's "..." in it): read by its keys in order, not as a
// document, so that it still gives what it shows.
Reading ReadJsonExcerpt(std::string_view text) {
  static const RE2 kKey(
      R"re("(name|gpu_ids?|entity_id|status|warnings?|info|error)"\s*:\s*(?:"((?:[^"\\]|\\.)*)"|(\d+)))re");
  Reading reading;
  std::string test;
  re2::StringPiece input = Piece(text);
  std::string key, value, number;
  while (RE2::FindAndConsume(&input, kKey, &key, &value, &number)) {
    if (key == "name") {
      test = value;
    } else if (key == "gpu_id" || key == "gpu_ids" || key == "entity_id") {
      auto gpu = ParseInt<uint32_t>(number.empty() ? value : number);
      if (!gpu || test.empty()) continue;
      reading.results.push_back(TestResult{.dcgm_name = test, .outcome = Outcome::kPass, .gpus = {*gpu}});
      reading.gpus_named.insert(*gpu);
    } else if (reading.results.empty()) {
      continue;
    } else if (key == "status") {
      if (auto outcome = OutcomeOf(value)) reading.results.back().outcome = *outcome;
    } else if (!value.empty()) {
      reading.results.back().messages.push_back(Tidy(value));
    }
  }
  return reading;
}

const char* StateOf(Outcome outcome) {
  switch (outcome) {
    case Outcome::kFail: return "faulty";
    case Outcome::kSkip: return "could_not_run";
    case Outcome::kPass:
    case Outcome::kWarn: break;
  }
  return "passed";
}

const char* WordOf(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass: return "passed";
    case Outcome::kFail: return "failed";
    case Outcome::kWarn: return "passed with a warning";
    case Outcome::kSkip: return "was skipped";
  }
  return "";
}

}  // namespace

bool LooksLikeDiag(std::string_view text) {
  static const RE2 kHeader(R"((?m)^\s*\|\s*Diagnostic\s*\|\s*Result\s*\|)");
  static const RE2 kSection(R"((?m)^\s*[|+]-----\s+(?:Metadata|Deployment|Integration|Hardware|Stress|Plugins)\s+-+[|+])");
  static const RE2 kTestRow(
      R"((?m)^\s*\|\s*(?:GPU Memory|Memory Bandwidth|Memtest|Diagnostic|Targeted Stress|Targeted Power|SM Stress|)"
      R"(Pulse Test|Context Create|PCIe|Denylist|Blacklist|NVML Library|CUDA Main Library|Inforom)\s*\|\s*)"
      R"((?:Pass|Fail|Warn|Skip)\b)");
  // The run could not be made (a plugin missing, the host engine gone): an error instead of a report.
  static const RE2 kError(R"((?m)^\s*Error: Unable to complete diagnostic\b)");
  const std::string_view head = text.substr(0, 64 * 1024);
  return HasJsonRoot(head) || RE2::PartialMatch(Piece(head), kHeader) ||
         RE2::PartialMatch(Piece(head), kSection) || RE2::PartialMatch(Piece(head), kTestRow) ||
         RE2::PartialMatch(Piece(head), kError);
}

Result<std::vector<DiagnosticRecord>> ParseDiag(std::string_view text) {
  std::string runtime_error;  // what a JSON report says instead of results when the run could not be made
  Reading reading;
  if (!HasJsonRoot(text)) reading = Read(text);
  else if (std::optional<Reading> whole = ReadJsonWhole(text, runtime_error)) reading = std::move(*whole);
  else reading = ReadJsonExcerpt(text);
  reading.run_level = CommandRunLevel(text);
  if (reading.results.empty() && !runtime_error.empty()) return Error{"dcgmi diag printed no report: " + runtime_error};
  if (reading.results.empty()) {
    // dcgmi prints its errors instead of a table when the run could not be made: say what it said.
    std::string said;
    for (std::string_view line : Split(text, '\n')) {
      if (!StartsWith(Trim(line), "Error: ")) continue;
      said += said.empty() ? "" : "; ";
      said += Trim(line);
    }
    if (!said.empty()) return Error{"dcgmi diag printed no report: " + said};
    return Error{"no dcgmi diag test result found"};
  }
  std::set<uint32_t> every_gpu = reading.gpus_named;
  for (size_t gpu = 0; every_gpu.empty() && gpu < reading.device_ids; ++gpu) every_gpu.insert(static_cast<uint32_t>(gpu));
  if (every_gpu.empty()) every_gpu.insert(0);
  const std::string level = reading.run_level.empty() ? "-r 3" : reading.run_level;

  // Each GPU's newest word on each test, with the messages about it.
  std::map<std::pair<uint32_t, std::string>, DiagnosticRecord> records;
  std::vector<std::pair<uint32_t, std::string>> order;
  for (const TestResult& result : reading.results) {
    const std::string test = TestNamed(result.dcgm_name);
    const std::vector<uint32_t> gpus =
        result.gpus.empty() ? std::vector<uint32_t>(every_gpu.begin(), every_gpu.end()) : result.gpus;
    for (uint32_t gpu : gpus) {
      const auto key = std::make_pair(gpu, test);
      auto [it, added] = records.try_emplace(key);
      DiagnosticRecord& record = it->second;
      if (added) {
        order.push_back(key);
        record.gpu_index = gpu;
        record.test = test;
        record.tool = "dcgmi diag";
        record.command = fmt::format("dcgmi diag {} -i {}", level, gpu);
      }
      // A GPU listed twice for one test (two DCGM tests map to one of ours): the worse result stands.
      const bool worse = added || result.outcome == Outcome::kFail ||
                         (result.outcome == Outcome::kSkip && record.state == "passed");
      if (!worse) continue;
      record.state = StateOf(result.outcome);
      std::vector<std::string> said;
      for (const std::string& message : result.messages) {
        const std::set<uint32_t> about = GpusMentioned(message);
        if (about.empty() || about.contains(gpu)) said.push_back(message);
      }
      record.summary = fmt::format("DCGM's {} test {} on GPU {}{}{}", result.dcgm_name, WordOf(result.outcome), gpu,
                                   said.empty() ? "" : ": ", fmt::join(said, " "));
    }
  }
  std::vector<DiagnosticRecord> out;
  for (const auto& key : order) out.push_back(std::move(records[key]));
  return out;
}

}  // namespace gpudoctor::dcgmi
