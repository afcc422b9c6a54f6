#include "diag/diag_summary.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <set>

#include "common/json_text.h"

namespace gpudoctor {

namespace {

using json = nlohmann::ordered_json;

// "GPU 1 memtest, GPU 2 burn"
std::string Which(const DiagSummary& summary, DiagState state) {
  std::string which;
  for (const DiagSummaryRow& row : summary.rows)
    if (row.state == state)
      which += fmt::format("{}GPU {} {}", which.empty() ? "" : ", ", row.gpu, DiagTestName(row.test));
  return which;
}

std::optional<DiagState> ParseDiagState(std::string_view name) {
  for (DiagState state : {DiagState::kPassed, DiagState::kFaulty, DiagState::kHung, DiagState::kCouldNotRun,
                          DiagState::kInterrupted})
    if (name == DiagStateName(state)) return state;
  return std::nullopt;
}

Result<DiagSummary> ReadSummary(const json& value) {
  DiagSummary summary;
  try {
    if (value.contains("level") && value["level"].is_number_integer()) summary.level = value["level"].get<int>();
    summary.exit_code = value.at("exit_code").get<int>();
    summary.line = value.at("line").get<std::string>();
    for (const json& result : value.at("results")) {
      auto test = ParseDiagTest(result.at("test").get<std::string>());
      auto state = ParseDiagState(result.at("state").get<std::string>());
      if (!test || !state) return Error{"a summary row names an unknown test or state: " + ToJsonText(result)};
      DiagSummaryRow row{.gpu = result.at("gpu").get<int>(), .test = *test, .state = *state};
      if (result.contains("value") && result["value"].is_number()) row.value = result["value"].get<double>();
      if (result.contains("unit") && result["unit"].is_string()) row.unit = result["unit"].get<std::string>();
      row.figure = result.value("figure", "");
      row.reason = result.value("reason", "");
      summary.rows.push_back(std::move(row));
    }
  } catch (const json::exception& e) {
    return Error{std::string("the summary line could not be read: ") + e.what()};
  }
  CountDiagSummary(summary);
  return summary;
}

}  // namespace

void CountDiagSummary(DiagSummary& s) {
  std::set<int> gpus;
  s.passed = s.faulty = s.hung = s.could_not_run = s.interrupted = 0;
  for (const DiagSummaryRow& row : s.rows) {
    gpus.insert(row.gpu);
    switch (row.state) {
      case DiagState::kPassed: ++s.passed; break;
      case DiagState::kFaulty: ++s.faulty; break;
      case DiagState::kHung: ++s.hung; break;
      case DiagState::kCouldNotRun: ++s.could_not_run; break;
      case DiagState::kInterrupted: ++s.interrupted; break;
    }
  }
  s.gpus = static_cast<int>(gpus.size());
  if (!s.line.empty()) return;
  std::string counts;
  auto add = [&](int count, DiagState state, const char* words, bool name_them) {
    if (count == 0) return;
    counts += fmt::format("{} {} {}", counts.empty() ? "" : ",", count, words);
    if (name_them) counts += " (" + Which(s, state) + ")";
  };
  add(s.passed, DiagState::kPassed, "passed", false);
  add(s.faulty, DiagState::kFaulty, "FAULTY", true);
  add(s.hung, DiagState::kHung, "HUNG", true);
  add(s.could_not_run, DiagState::kCouldNotRun, "could not run", true);
  add(s.interrupted, DiagState::kInterrupted, "interrupted", false);
  s.line = fmt::format("{} GPU{}, {} result{}:{}", s.gpus, s.gpus == 1 ? "" : "s", s.rows.size(),
                       s.rows.size() == 1 ? "" : "s", counts.empty() ? " none" : counts);
}

const char* DiagStateLabel(DiagState state) {
  switch (state) {
    case DiagState::kPassed: return "PASSED";
    case DiagState::kFaulty: return "FAULTY";
    case DiagState::kHung: return "HUNG";
    case DiagState::kCouldNotRun: return "COULD NOT RUN";
    case DiagState::kInterrupted: return "INTERRUPTED";
  }
  return "COULD NOT RUN";
}

std::string DiagSummaryJsonText(const DiagSummary& summary) {
  json rows = json::array();
  for (const DiagSummaryRow& row : summary.rows) {
    rows.push_back({{"gpu", row.gpu},
                    {"test", DiagTestName(row.test)},
                    {"state", DiagStateName(row.state)},
                    {"value", row.value ? json(*row.value) : json(nullptr)},
                    {"unit", row.unit.empty() ? json(nullptr) : json(row.unit)},
                    {"figure", row.figure},
                    {"reason", row.reason}});
  }
  return ToJsonText(json{{"event", "summary"},
                         {"level", summary.level ? json(*summary.level) : json(nullptr)},
                         {"gpus", summary.gpus},
                         {"passed", summary.passed},
                         {"faulty", summary.faulty},
                         {"hung", summary.hung},
                         {"could_not_run", summary.could_not_run},
                         {"interrupted", summary.interrupted},
                         {"exit_code", summary.exit_code},
                         {"line", summary.line},
                         {"results", rows}});
}

Result<DiagSummary> FindDiagSummary(std::string_view json_lines) {
  std::optional<json> found;
  size_t start = 0;
  while (start < json_lines.size()) {
    size_t end = json_lines.find('\n', start);
    if (end == std::string_view::npos) end = json_lines.size();
    const std::string_view line = json_lines.substr(start, end - start);
    start = end + 1;
    if (line.find("\"summary\"") == std::string_view::npos) continue;
    json value = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!value.is_object()) continue;
    auto event = value.find("event");
    if (event != value.end() && event->is_string() && *event == "summary") found = std::move(value);
  }
  if (!found) return Error{"gpudoctor diag printed no summary"};
  return ReadSummary(*found);
}

}  // namespace gpudoctor
