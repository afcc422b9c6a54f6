// One verdict: every command that judges a machine renders the same
// assessment (src/assess), so for the same input they must agree on the
// worst severity, the problems of each GPU, each GPU's identity and what
// could not be checked. This runs every example scenario and every captured
// nvidia-smi output through status, check, triage and npd, and every scenario
// through the agent's API after its first samples.
//
// The differences that must exist are listed in docs/design.md ("One
// verdict"): only the agent sees trends over time, and npd reduces the
// verdict to one line and NPD's exit status.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/run_binary.h"
#include "tests/running_agent.h"

namespace gpudoctor {
namespace {

using nlohmann::json;

struct Input {
  std::string name;       // for the test's name
  std::string arguments;  // what selects it: --simulate FILE or --from-smi FILE (and --logs)
  std::string env;        // what pins a scenario's time
  std::string scenario;   // the scenario file, for the agent; empty for a capture
  std::string fake_now;   // the scenario's pinned time
};

// A scenario is pinned at its own `start`, so every command sees the same
// moment (and the same jitter) of it.
std::string StartOf(const std::filesystem::path& scenario) {
  std::ifstream in(scenario);
  static const std::regex kStart(R"re(^start\s*=\s*"([^"]+)")re");
  std::smatch match;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, match, kStart)) return match[1];
  return "0s";
}

std::vector<Input> Inputs() {
  std::vector<Input> inputs;
  const std::filesystem::path source(GPUDOCTOR_SOURCE_DIR);
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(source / "examples"))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  for (const auto& entry : std::filesystem::directory_iterator(source / "testdata" / "nvidia_smi"))
    if (entry.is_regular_file()) files.push_back(entry.path());
  // The public reports beyond the shared corpus (the corpus' own files are copies of those above).
  for (const auto& entry : std::filesystem::directory_iterator(source / "testdata" / "health" / "nvidia_smi"))
    if (entry.is_regular_file() &&
        !std::filesystem::exists(source / "testdata" / "nvidia_smi" / entry.path().filename()))
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    if (file.extension() == ".toml") {
      inputs.push_back({file.stem().string(), "--simulate " + file.string(), "GPUDOCTOR_FAKE_NOW=" + StartOf(file),
                        file.string(), StartOf(file)});
    } else {
      inputs.push_back({"smi_" + file.stem().string(), "--from-smi " + file.string(), ""});
    }
  }
  // A lost GPU and the kernel log that names it: one incident on one card.
  inputs.push_back({"fallen_off_bus_with_its_log",
                    "--simulate " + (source / "examples" / "gpu-fallen-off-bus.toml").string() + " --logs " +
                        (source / "testdata" / "kernel_logs" / "047.log").string(),
                    "GPUDOCTOR_FAKE_NOW=" + StartOf(source / "examples" / "gpu-fallen-off-bus.toml")});
  return inputs;
}

struct Answer {
  int exit_code = -1;
  json answer;  // null when the output is not JSON (a refused input)
  std::string output;
};

Answer RunJson(const Input& input, const std::string& command) {
  testing::RunResult result = testing::RunGpudoctor("--json --probe-timeout 2s " + command + " " + input.arguments,
                                                    testing::Stderr::kDiscard, input.env);
  Answer run{result.exit_code, json(), result.output};
  run.answer = json::parse(result.output, nullptr, /*allow_exceptions=*/false);
  if (run.answer.is_discarded()) run.answer = json();
  return run;
}

// "gpu 3" or "host" -> the problems told there: id, and subject when it has one.
std::map<std::string, std::multiset<std::string>> ProblemsByGpu(const json& findings) {
  std::map<std::string, std::multiset<std::string>> by_gpu;
  for (const json& finding : findings) {
    const std::string severity = finding.value("severity", "");
    if (severity != "warning" && severity != "critical") continue;
    std::string where = "host";
    if (finding.contains("gpu") && finding["gpu"].is_object() && finding["gpu"].contains("index") &&
        finding["gpu"]["index"].is_number())
      where = "gpu " + std::to_string(finding["gpu"]["index"].get<int>());
    by_gpu[where].insert(finding.value("key", finding.value("id", "")));
  }
  return by_gpu;
}

std::set<std::string> NotChecked(const json& not_checked) {
  std::set<std::string> rules;
  if (!not_checked.is_array()) return rules;
  for (const json& item : not_checked) rules.insert(item.value("rule", ""));
  return rules;
}

json Identities(const json& gpus) {
  json identities = json::array();
  if (!gpus.is_array()) return identities;
  for (const json& gpu : gpus)
    identities.push_back({gpu.value("index", -1), gpu.value("uuid", json()), gpu.value("serial", json()),
                          gpu.value("pci_bus_id", json()), gpu.value("identity", json())});
  return identities;
}

// The agent's open findings for a scenario once it has sampled three times, from /api/v1/findings; null when it
// did not start or sample within a minute (`why` holds its log).
json AgentFindings(const Input& input, std::string& why) {
  testing::RunningAgent agent(testing::AgentSetup{
      .scenario = std::filesystem::path(input.scenario).filename().string(),
      .env = {{"GPUDOCTOR_FAKE_NOW", input.fake_now}},
      .probe_timeout = "2",  // check's, so both judge a slow probe by the same deadline
  });
  const std::chrono::seconds minute(60);
  if (!agent.WaitUntilHealthy(minute) || !testing::Eventually([&] { return agent.SamplesTaken() >= 3; }, minute)) {
    why = "the agent gave no findings within a minute: " + agent.log();
    return nullptr;
  }
  return agent.Findings();
}

// What only time shows (docs/design.md, "One verdict"): the trend detectors (src/health/detectors), which only the
// agent runs, and nvlink_errors, which judges a rise where there is an earlier sample (the agent's) and, in a
// single look, the count since the counters were reset.
bool NeedsTime(const std::string& key) {
  static const std::set<std::string> kRules = {
      "memory_leak",   "utilization_stuck", "utilization_flapping", "tensor_cores_idle", "gpu_straggler",
      "cooling_failure", "job_stall",       "job_loss_nan",         "job_loss_flat",     "nvlink_errors"};
  return kRules.count(key.substr(0, key.find_first_of("@/"))) > 0;
}

class Agreement : public ::testing::TestWithParam<Input> {};

TEST_P(Agreement, StatusCheckTriageAndNpdTellTheSameStory) {
  const Input& input = GetParam();
  const Answer check = RunJson(input, "check");
  const Answer status = RunJson(input, "status");
  const Answer triage = RunJson(input, "triage");

  // An input one command refuses, every command refuses, with the same exit status.
  if (check.exit_code >= 64) {
    EXPECT_EQ(status.exit_code, check.exit_code) << status.output;
    EXPECT_EQ(triage.exit_code, check.exit_code) << triage.output;
    return;
  }
  ASSERT_TRUE(check.answer.is_object()) << check.output;
  ASSERT_TRUE(status.answer.is_object()) << status.output;
  ASSERT_TRUE(triage.answer.is_object()) << triage.output;

  const std::string worst = check.answer["status"];
  EXPECT_EQ(status.answer["status"], worst);
  EXPECT_EQ(triage.answer["status"], worst);

  const auto problems = ProblemsByGpu(check.answer["findings"]);
  EXPECT_EQ(ProblemsByGpu(status.answer["findings"]), problems) << "status";
  EXPECT_EQ(ProblemsByGpu(triage.answer["findings"]), problems) << "triage";

  EXPECT_EQ(Identities(status.answer["verdicts"]), Identities(check.answer["gpus"]));
  EXPECT_EQ(Identities(triage.answer["gpus"]), Identities(check.answer["gpus"]));

  const std::set<std::string> not_checked = NotChecked(check.answer["not_checked"]);
  EXPECT_EQ(NotChecked(status.answer["not_checked"]), not_checked);
  EXPECT_EQ(NotChecked(triage.answer["not_checked"]), not_checked);

  // npd: NonOK (1) exactly when a finding is at --severity or worse, and its
  // line names a problem check reports.
  for (const std::string severity : {"critical", "warning"}) {
    testing::RunResult npd =
        testing::RunGpudoctor("--probe-timeout 2s npd --severity " + severity + " " + input.arguments,
                              testing::Stderr::kDiscard, input.env);
    const bool problem = worst == "critical" || (severity == "warning" && worst == "warning");
    EXPECT_EQ(npd.exit_code, problem ? 1 : 0) << severity << ": " << npd.output;
    if (!problem) continue;
    bool named = false;
    for (const auto& [where, ids] : problems)
      for (const std::string& key : ids) named |= npd.output.find(key.substr(0, key.find('@'))) != std::string::npos;
    EXPECT_TRUE(named) << npd.output;
  }
}

// The agent renders the same assessment from its samples: after its first samples, its open findings are check's
// problems, GPU for GPU, apart from what only time shows.
class AgentAgreement : public ::testing::TestWithParam<Input> {};

TEST_P(AgentAgreement, TheAgentTellsChecksStory) {
  const Input& input = GetParam();
  const Answer check = RunJson(input, "check");
  ASSERT_TRUE(check.answer.is_object()) << check.output;
  std::string why;
  const json agent = AgentFindings(input, why);
  ASSERT_TRUE(agent.is_array()) << why;
  auto without_trends = [](std::map<std::string, std::multiset<std::string>> by_gpu) {
    for (auto it = by_gpu.begin(); it != by_gpu.end();) {
      std::erase_if(it->second, NeedsTime);
      it = it->second.empty() ? by_gpu.erase(it) : std::next(it);
    }
    return by_gpu;
  };
  EXPECT_EQ(without_trends(ProblemsByGpu(agent)), without_trends(ProblemsByGpu(check.answer["findings"])))
      << "agent: " << agent.dump() << "\ncheck: " << check.answer["findings"].dump();
}

std::string NameOf(const ::testing::TestParamInfo<Input>& info) {
  std::string name = info.param.name;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

// The agent reads live GPUs or a scenario: not a capture.
std::vector<Input> Scenarios() {
  std::vector<Input> scenarios = Inputs();
  std::erase_if(scenarios, [](const Input& input) { return input.scenario.empty(); });
  return scenarios;
}

INSTANTIATE_TEST_SUITE_P(EveryScenarioAndCapture, Agreement, ::testing::ValuesIn(Inputs()), NameOf);
INSTANTIATE_TEST_SUITE_P(EveryScenario, AgentAgreement, ::testing::ValuesIn(Scenarios()), NameOf);

}  // namespace
}  // namespace gpudoctor
