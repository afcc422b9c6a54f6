// `gpudoctor check`, `triage` and `report` end to end: the built binary on
// the example scenarios, captured nvidia-smi samples and kernel logs.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/sqlite_store.h"
#include "tests/run_binary.h"

namespace gpudoctor {
namespace {

using nlohmann::json;
using testing::Example;

// The binary, run through the shell (gtest's Test::Run would hide a plain Run here).
testing::RunResult Gpudoctor(const std::string& arguments) { return testing::RunGpudoctor(arguments); }

std::string Sample(const std::string& name) { return std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/nvidia_smi/" + name; }
std::string KernelLog(const std::string& name) {
  return std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/kernel_logs/" + name;
}

json Parse(const std::string& text) {
  auto parsed = json::parse(text, nullptr, false);
  EXPECT_FALSE(parsed.is_discarded()) << text;
  return parsed.is_discarded() ? json::object() : parsed;
}

std::set<std::string> Problems(const json& result) {
  std::set<std::string> problems;
  for (const auto& f : result.value("findings", json::array()))
    if (f["severity"] != "ok") problems.insert(f["id"].get<std::string>() + ":" + f["severity"].get<std::string>());
  return problems;
}

bool HasProblem(const json& result, const std::string& id) {
  for (const auto& f : result.value("findings", json::array()))
    if (f["id"] == id && f["severity"] != "ok") return true;
  return false;
}

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpudoctor-check-XXXXXX").string();
    path_ = mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string Shell(const std::string& command) {
  std::string output;
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  pclose(pipe);
  return output;
}

// ---- bytes from outside ---------------------------------------------------------

// A kernel-log line with bytes that are not UTF-8 and terminal escapes, on a
// GPU that fell off the bus: the answer is whole, its JSON valid, and its
// text shows the escapes instead of obeying them.
class HostileLine : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = dir_.path() + "/kern.log";
    // Xid 13 on GPU 0, which still answers: a finding of its own, with the line as evidence.
    std::ofstream(log_) << "Dec  6 10:00:00 node kernel: [ 100.0] NVRM: Xid (PCI:0000:1b:00): 13, pid=1234, "
                           "name=py\xff\xfe\x1b[2J\x1b[8m\rthon, Graphics Exception: ESR 0x405840=0x1\n";
  }
  std::string Command(const std::string& command) const {
    return command + " --simulate " + Example("gpu-fallen-off-bus.toml") + " --no-host --logs " + log_;
  }
  TempDir dir_;
  std::string log_;
};

TEST_F(HostileLine, JsonOfEveryCommandSurvivesIt) {
  for (const char* command : {"check", "triage"}) {
    SCOPED_TRACE(command);
    auto result = Gpudoctor(std::string("--json ") + Command(command));
    EXPECT_EQ(result.exit_code, 2) << result.output;
    json parsed = Parse(result.output);
    EXPECT_FALSE(parsed.empty());
  }
  auto check = Gpudoctor("--json " + Command("check"));
  EXPECT_NE(check.output.find("py\xef\xbf\xbd\xef\xbf\xbd"), std::string::npos) << "replaced, not dropped";
  auto logs = Gpudoctor("--json logs " + log_);
  EXPECT_FALSE(Parse(logs.output.substr(0, logs.output.find('\n'))).empty());
}

TEST_F(HostileLine, TextShowsEscapesInsteadOfObeyingThem) {
  for (const std::string& command : {Command("check"), Command("triage"), std::string("logs ") + log_}) {
    SCOPED_TRACE(command);
    auto result = testing::RunGpudoctor("--color never " + command, testing::Stderr::kCapture);
    EXPECT_EQ(result.output.find('\x1b'), std::string::npos) << result.output;
    EXPECT_EQ(result.output.find('\r'), std::string::npos) << result.output;
    EXPECT_EQ(result.output.find("\xff"), std::string::npos) << result.output;
  }
  auto check = testing::RunGpudoctor("--color never " + Command("check"));
  EXPECT_NE(check.output.find("name=py\\xff\\xfe\\u001b[2J\\u001b[8m\\u000dthon"), std::string::npos)
      << check.output;
  // Colour, when asked for, is gpudoctor's own and only that.
  auto colour = testing::RunGpudoctor("--color always " + Command("check"));
  EXPECT_NE(colour.output.find("\x1b[1;31mCRITICAL\x1b[0m"), std::string::npos) << colour.output;
  EXPECT_EQ(colour.output.find("\x1b[2J"), std::string::npos) << colour.output;
  EXPECT_EQ(colour.output.find("\x1b[8m"), std::string::npos) << colour.output;
}

// A capture from a dead machine holds whatever the process names held.
TEST(HostileCapture, BytesInACapturedProcessNameNeverLoseTheAnswer) {
  TempDir dir;
  std::ifstream in(Sample("table_h100_x4_processes.txt"));
  std::stringstream text;
  text << in.rdbuf();
  std::string capture = text.str();
  const std::string name = "/opt/conda/bin/python3.10";
  const size_t at = capture.find(name);
  ASSERT_NE(at, std::string::npos);
  capture.replace(at, name.size(), "/opt/\xff\xfe/py\x1b[2Jth\x9bn3.10    ");
  const std::string path = dir.path() + "/smi.txt";
  std::ofstream(path) << capture;
  auto json_run = Gpudoctor("--json check --from-smi " + path);
  EXPECT_NE(json_run.exit_code, 70) << json_run.output;
  EXPECT_FALSE(Parse(json_run.output).empty());
  auto text_run = testing::RunGpudoctor("--color never check --from-smi " + path, testing::Stderr::kCapture);
  EXPECT_EQ(text_run.output.find('\x1b'), std::string::npos) << text_run.output;
}

// A process name any GPU user can set: one line in the table, no escape obeyed.
TEST(ProcessNames, CannotDriveTheTerminalOrStartALine) {
  TempDir dir;
  const std::string scenario = dir.path() + "/s.toml";
  std::ofstream(scenario) << "gpu_count = 1\n[gpu.0]\nprocesses = [{ pid = 7, name = \"evil\\u001b[2J\\nOK   all GPUs "
                             "healthy\", used_memory_mib = 10 }]\n";
  auto status = testing::RunGpudoctor("--color never status --simulate " + scenario);
  EXPECT_EQ(status.output.find('\x1b'), std::string::npos) << status.output;
  EXPECT_EQ(status.output.find("\nOK   all GPUs"), std::string::npos) << "a line of its own: " << status.output;
  EXPECT_NE(status.output.find("evil\\u001b[2J\\nOK"), std::string::npos) << status.output;
}

// ---- check -------------------------------------------------------------------

TEST(CheckEndToEnd, HealthyServerPassesAndPrintsTheChecklist) {
  auto result = Gpudoctor("--color never check --no-host --no-logs --simulate " + Example("healthy-8xh100.toml"));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("Weekly checklist"), std::string::npos);
  EXPECT_NE(result.output.find("GPUs below their temperature limits"), std::string::npos);
  EXPECT_NE(result.output.find("Backups working"), std::string::npos);
  EXPECT_NE(result.output.find("no problems found"), std::string::npos);
}

// A simulated server, like a capture, is judged alone: this machine's host,
// kernel log and agent history say nothing about it.
TEST(CheckEndToEnd, ASimulatedServerOrACaptureIsJudgedAlone) {
  for (const std::string& input : {"--simulate " + Example("healthy-8xh100.toml"), "--from-smi " + Sample("015.txt")}) {
    SCOPED_TRACE(input);
    json check = Parse(Gpudoctor("--json check " + input).output);
    std::map<std::string, std::string> sources;
    for (const auto& note : check["sources"]) sources[note["source"]] = note["status"];
    EXPECT_EQ(sources["host signals"], "skipped");
    EXPECT_EQ(sources["kernel log"], "not read");
    EXPECT_EQ(sources["agent history"], "skipped");
  }
  EXPECT_EQ(Gpudoctor("check --simulate " + Example("healthy-8xh100.toml")).exit_code, 0);
}

TEST(CheckEndToEnd, ExitStatusFollowsTheWorstFinding) {
  EXPECT_EQ(Gpudoctor("check --no-host --no-logs --simulate " + Example("overheating.toml")).exit_code, 2);
  EXPECT_EQ(Gpudoctor("check --no-host --no-logs --simulate " + Example("gpu-fallen-off-bus.toml")).exit_code, 2);
  EXPECT_EQ(Gpudoctor("check --from-smi " + Sample("011.txt")).exit_code, 1);  // remapped rows pending: warning
}

// --from is the name for every pasted output; --from-smi stays.
TEST(CheckEndToEnd, FromReadsTheListsAndWarningsOperatorsPaste) {
  const std::string reports = std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/health/nvidia_smi/";
  auto nvlink = Gpudoctor("--json check --from " + reports + "101.txt");
  EXPECT_EQ(nvlink.exit_code, 2) << nvlink.output;
  EXPECT_NE(nvlink.output.find("\"nvlink_down\""), std::string::npos) << nvlink.output;
  auto inforom = Gpudoctor("--json check --from-smi " + reports + "102.txt");
  EXPECT_EQ(inforom.exit_code, 1) << inforom.output;
  EXPECT_NE(inforom.output.find("\"inforom_corrupted\""), std::string::npos) << inforom.output;
}

// Every command reads the one config file: named by --config, or by
// GPUDOCTOR_CONFIG (the default /etc/gpudoctor/config.toml is taken the same way).
TEST(CheckEndToEnd, TheConfigFileNamedByTheEnvironmentIsRead) {
  TempDir dir;
  const std::string config = dir.path() + "/site.toml";
  std::ofstream(config) << "[rules.temperature_high]\nuse_gpu_limits = false\nwarning_c = 50\ncritical_c = 95\n";
  const std::string scenario = "--no-host --no-logs --simulate " + Example("healthy-8xh100.toml");
  EXPECT_EQ(Gpudoctor("check " + scenario).exit_code, 0);
  auto lowered = testing::RunGpudoctor("check " + scenario, testing::Stderr::kCapture, "GPUDOCTOR_CONFIG=" + config);
  EXPECT_EQ(lowered.exit_code, 1) << lowered.output;
  EXPECT_NE(lowered.output.find("temperature_high"), std::string::npos) << lowered.output;
  auto missing = testing::RunGpudoctor("check " + scenario, testing::Stderr::kCapture,
                                       "GPUDOCTOR_CONFIG=" + dir.path() + "/missing.toml");
  EXPECT_EQ(missing.exit_code, 66) << missing.output;
  EXPECT_NE(missing.output.find("GPUDOCTOR_CONFIG: "), std::string::npos) << missing.output;
  auto shown = testing::RunGpudoctor("--json config show", testing::Stderr::kDiscard, "GPUDOCTOR_CONFIG=" + config);
  EXPECT_EQ(shown.exit_code, 0);
  EXPECT_NE(shown.output.find("\"rules.temperature_high.warning_c\""), std::string::npos) << shown.output;
}

TEST(CheckEndToEnd, JsonHasTheDocumentedShape) {
  auto result = Gpudoctor("--json check --no-host --no-logs --simulate " + Example("overheating.toml"));
  json check = Parse(result.output);
  EXPECT_EQ(check["status"], "critical");
  ASSERT_TRUE(check["checklist"].is_object() || check["checklist"].is_array()) << check["checklist"];
  ASSERT_TRUE(check["findings"].is_array());
  ASSERT_FALSE(check["findings"].empty());
  bool temperature = false;
  for (const auto& f : check["findings"]) {
    for (const char* key : {"id", "severity", "summary", "evidence", "cause", "actions"})
      EXPECT_TRUE(f.contains(key)) << key << " missing in " << f;
    EXPECT_TRUE(f["evidence"].is_array());
    EXPECT_TRUE(f["actions"].is_array());
    if (f["id"] == "temperature_high" && f["severity"] == "critical") {
      temperature = true;
      ASSERT_TRUE(f["gpu"].is_object());
      EXPECT_TRUE(f["gpu"]["index"].is_number());
      EXPECT_TRUE(f["gpu"].contains("uuid"));
      EXPECT_TRUE(f["gpu"].contains("pci_bus_id"));
      EXPECT_FALSE(f["evidence"].empty());
      EXPECT_FALSE(f["actions"].empty());
    }
  }
  EXPECT_TRUE(temperature) << ::testing::PrintToString(Problems(check));
}

TEST(CheckEndToEnd, EachCapturedSampleGivesTheFindingItsHeaderNames) {
  struct Case {
    const char* sample;
    std::vector<std::string> findings;  // empty: healthy
    int exit_code;
  } cases[] = {
      {"001.txt", {"gpu_unreachable"}, 2},
      {"005.txt", {"driver_mismatch"}, 2},
      {"008.txt", {"driver_unavailable"}, 2},
      {"009.txt", {"fan_failure", "field_error"}, 2},
      {"011.txt", {"remapped_rows_pending"}, 1},
      {"012.txt", {"temperature_high"}, 1},
      {"014.txt", {"power_capped", "field_error"}, 1},  // power.default_limit=[Unknown Error]
      {"015.txt", {}, 0},
      {"018.txt", {"ecc_uncorrectable"}, 2},
  };
  for (const auto& c : cases) {
    auto result = Gpudoctor("--json check --no-logs --from-smi " + Sample(c.sample));
    EXPECT_EQ(result.exit_code, c.exit_code) << c.sample;
    json check = Parse(result.output);
    for (const std::string& finding : c.findings)
      EXPECT_TRUE(HasProblem(check, finding)) << c.sample << ": " << ::testing::PrintToString(Problems(check));
    if (c.findings.empty()) {
      EXPECT_TRUE(Problems(check).empty()) << c.sample << ": " << ::testing::PrintToString(Problems(check));
    }
  }
}

TEST(CheckEndToEnd, CapturedLogsOfADeadMachineAreJudged) {
  auto result = Gpudoctor("--json check --from-smi " + Sample("015.txt") + " --logs " + KernelLog("028.log"));
  json check = Parse(result.output);
  EXPECT_TRUE(HasProblem(check, "xid_recent")) << ::testing::PrintToString(Problems(check));
  EXPECT_EQ(result.exit_code, 2);
}

TEST(CheckEndToEnd, BadInputGetsItsExitCode) {
  EXPECT_EQ(Gpudoctor("check --no-logs --from-smi /nonexistent/smi.txt").exit_code, 66);
  EXPECT_EQ(Gpudoctor("check --from-smi " + Sample("015.txt") + " --logs /nonexistent/kern.log").exit_code, 66);
  EXPECT_EQ(Gpudoctor("check --no-logs --from-smi " + Sample("015.txt") + " --since soon").exit_code, 64);
}

// Each ok line says what was judged: the simulated NVML, a capture (nothing
// called), never this machine's empty PCI bus against simulated GPUs.
TEST(CheckEndToEnd, OkLinesSayWhatWasActuallyChecked) {
  json simulated = Parse(Gpudoctor("--json check --no-logs --simulate " + Example("healthy-8xh100.toml")).output);
  std::map<std::string, std::string> summaries;
  for (const auto& f : simulated["findings"]) summaries[f["id"]] = f["summary"];
  EXPECT_EQ(summaries["nvml_hang"], "The simulated NVML answered every call in time");
  EXPECT_FALSE(summaries.count("gpu_missing")) << summaries["gpu_missing"];
  bool host_note = false;
  for (const auto& source : simulated["sources"])
    host_note |= source["source"] == "host signals" &&
                 source["detail"].get<std::string>().find("this machine's host is not the one judged") !=
                     std::string::npos;
  EXPECT_TRUE(host_note) << simulated["sources"];

  json captured = Parse(Gpudoctor("--json check --from-smi " + Sample("011.txt")).output);
  for (const auto& f : captured["findings"]) {
    if (f["id"] == "nvml_hang") {
      EXPECT_EQ(f["summary"], "nvidia-smi answered when the capture was taken; nothing was called here");
    }
  }
}

// The agent watched GPU 6 stuck at 100% for longer than one look can see:
// check reports it, with its age; without the history it says the trend
// checks need the agent; a history the agent stopped writing is a warning.
TEST(CheckEndToEnd, TheAgentsOpenFindingsJoinCheck) {
  TempDir dir;
  const std::string db = dir.path() + "/history.db";
  const std::string config = dir.path() + "/agent.toml";
  std::ofstream(config) << "[detectors.utilization_stuck]\nafter = \"2s\"\n";
  Gpudoctor("--config " + config + " --simulate " + Example("utilization-stuck.toml") +
            " agent --interval 1s --duration 5s --listen 127.0.0.1:0 --log none --db " + db);
  const std::string check = "--json check --no-host --no-logs --simulate " + Example("utilization-stuck.toml");

  auto result = Gpudoctor(check + " --db " + db);
  EXPECT_EQ(result.exit_code, 1) << result.output;
  json with_history = Parse(result.output);
  bool stuck = false;
  for (const auto& f : with_history["findings"]) {
    if (f["id"] != "utilization_stuck") continue;
    stuck = true;
    EXPECT_NE(f["summary"].get<std::string>().find("(agent: open for "), std::string::npos) << f;
    EXPECT_NE(f["evidence"].back().get<std::string>().find("the agent's last sample"), std::string::npos) << f;
  }
  EXPECT_TRUE(stuck) << with_history["findings"];

  json without = Parse(Gpudoctor(check + " --db " + dir.path() + "/none.db").output);
  EXPECT_FALSE(HasProblem(without, "utilization_stuck"));
  for (const auto& f : without["findings"]) {
    if (f["id"] == "agent_history") {
      EXPECT_EQ(f["summary"], "Trend checks not run: they need `gpudoctor agent` and its history") << f;
    }
  }

  const std::string stale_config = dir.path() + "/stale.toml";
  std::ofstream(stale_config) << "[rules.agent_history]\nstale_after = \"1s\"\n";
  sleep(2);
  json stale = Parse(Gpudoctor("--config " + stale_config + " " + check + " --db " + db).output);
  EXPECT_TRUE(HasProblem(stale, "agent_history")) << stale["findings"];
  EXPECT_FALSE(HasProblem(stale, "utilization_stuck")) << stale["findings"];
}

// `maintenance done` keeps upkeep in the history; check reports what is
// overdue from it, and stops once the task is recorded again.
TEST(MaintenanceEndToEnd, RecordsUpkeepAndCheckReportsWhatIsOverdue) {
  TempDir dir;
  const std::string db = dir.path() + "/history.db";
  json schedule = Parse(Gpudoctor("--json maintenance --db " + db).output);
  ASSERT_EQ(schedule["tasks"].size(), 3u) << schedule;
  for (const auto& task : schedule["tasks"]) EXPECT_TRUE(task["last_recorded"].is_null()) << task;

  auto unknown = testing::RunGpudoctor("maintenance done dusting --db " + db, testing::Stderr::kCapture);
  EXPECT_EQ(unknown.exit_code, 64);
  EXPECT_NE(unknown.output.find("The schedule has: 'driver_and_firmware', 'dust_cleaning' and"), std::string::npos)
      << unknown.output;
  auto misspelt = testing::RunGpudoctor("maintenance done dust_claning --db " + db, testing::Stderr::kCapture);
  EXPECT_EQ(misspelt.exit_code, 64);
  EXPECT_NE(misspelt.output.find("no maintenance task 'dust_claning'. Did you mean 'dust_cleaning'?"),
            std::string::npos)
      << misspelt.output;
  EXPECT_EQ(Gpudoctor("maintenance done dust_cleaning --at yesterday --db " + db).exit_code, 64);

  auto done = Gpudoctor("--json maintenance done dust_cleaning --at 40d --note \"filters\" --db " + db);
  ASSERT_EQ(done.exit_code, 0) << done.output;
  EXPECT_EQ(Parse(done.output)["task"], "dust_cleaning");

  const std::string check =
      "--json check --no-host --no-logs --simulate " + Example("healthy-8xh100.toml") + " --db " + db;
  auto overdue = Gpudoctor(check);
  EXPECT_EQ(overdue.exit_code, 1) << overdue.output;
  json findings = Parse(overdue.output)["findings"];
  bool reported = false;
  for (const auto& f : findings) {
    if (f["id"] != "maintenance_due" || f["severity"] == "ok") continue;
    reported = true;
    EXPECT_NE(f["summary"].get<std::string>().find("40 days ago"), std::string::npos) << f;
  }
  EXPECT_TRUE(reported) << findings;
  schedule = Parse(Gpudoctor("--json maintenance --db " + db).output);
  for (const auto& task : schedule["tasks"])
    EXPECT_EQ(task["overdue"].get<bool>(), task["task"] == "dust_cleaning") << task;

  ASSERT_EQ(Gpudoctor("maintenance done dust_cleaning --db " + db).exit_code, 0);
  auto current = Gpudoctor(check);
  EXPECT_EQ(current.exit_code, 0) << current.output;
  EXPECT_FALSE(HasProblem(Parse(current.output), "maintenance_due"));
}

// `gpudoctor diag` keeps its results in the agent's history; status and check
// show each GPU's last tests, and check turns a fault into a finding that
// names the command to run the test again.
TEST(DiagnosticsEndToEnd, StatusAndCheckShowTheLastDiagnostics) {
  TempDir dir;
  const std::string db = dir.path() + "/history.db";
  ASSERT_EQ(Gpudoctor("maintenance done dust_cleaning --db " + db).exit_code, 0);  // an agent's history
  const std::string simulate = " --simulate " + Example("healthy-8xh100.toml") + " --db " + db;
  json before = Parse(Gpudoctor("--json status" + simulate).output);
  ASSERT_EQ(before["gpus"].size(), 8u) << before;
  EXPECT_EQ(before["gpus"][2]["diagnostics"], json::array());
  const std::string uuid = before["gpus"][2]["uuid"];

  auto record = [&](std::string state, WallTime finished_at) {
    auto store = SqliteHistoryStore::Open(db, SqliteStoreOptions{});
    ASSERT_TRUE(store.ok()) << store.error().message;
    ASSERT_TRUE((*store)
                    ->RecordDiagnostic({.finished_at = finished_at,
                                        .gpu_index = 2,
                                        .uuid = uuid,
                                        .test = "memtest",
                                        .state = state,
                                        .summary = "memtest " + state,
                                        .command = "gpudoctor diag memtest --gpu 2 --size 50%"})
                    .ok());
  };
  const WallTime now = SystemClock::Instance().Now();
  record("faulty", now - std::chrono::hours(3));

  json status = Parse(Gpudoctor("--json status" + simulate).output);
  ASSERT_EQ(status["gpus"][2]["diagnostics"].size(), 1u) << status["gpus"][2];
  EXPECT_EQ(status["gpus"][2]["diagnostics"][0]["state"], "faulty");
  EXPECT_EQ(status["gpus"][2]["diagnostics"][0]["command"], "gpudoctor diag memtest --gpu 2 --size 50%");
  EXPECT_EQ(status["gpus"][1]["diagnostics"], json::array());
  auto table = Gpudoctor("status" + simulate);
  EXPECT_NE(table.output.find("GPU 2   memtest FAULTY 3 h ago"), std::string::npos) << table.output;

  const std::string check = "--json check --no-host --no-logs" + simulate;
  auto faulty = Gpudoctor(check);
  EXPECT_EQ(faulty.exit_code, 2) << faulty.output;
  json result = Parse(faulty.output);
  EXPECT_EQ(result["gpus"][2]["diagnostics"][0]["state"], "faulty");
  bool reported = false;
  for (const auto& f : result["findings"]) {
    if (f["id"] != "diagnostic_failed" || f["severity"] == "ok") continue;
    reported = true;
    EXPECT_EQ(f["severity"], "critical");
    EXPECT_EQ(f["gpu"]["index"], 2);
    EXPECT_NE(f["actions"].dump().find("gpudoctor diag memtest --gpu 2 --size 50%"), std::string::npos) << f;
  }
  EXPECT_TRUE(reported) << result["findings"];

  record("passed", now - std::chrono::hours(1));  // the newer run passes
  auto passed = Gpudoctor(check);
  EXPECT_EQ(passed.exit_code, 0) << passed.output;
  EXPECT_FALSE(HasProblem(Parse(passed.output), "diagnostic_failed"));
}

// `ack` records in the agent's history that an operator dealt with an
// incident; the agent resolves it at its next sample and, the fault unchanged,
// keeps it quiet rather than opening it again.
TEST(AckEndToEnd, TheAgentResolvesAnAcknowledgedIncidentAndKeepsItQuiet) {
  TempDir dir;
  const std::string db = dir.path() + "/history.db";
  const std::string agent = "--simulate " + Example("overheating.toml") +
                            " agent --interval 1s --duration 3s --listen 127.0.0.1:0 --log none --db " + db;
  ASSERT_EQ(Gpudoctor(agent).exit_code, 0);
  json open = Parse(Gpudoctor("--json history --findings --open --since 1h --db " + db).output);
  int64_t incident = -1;
  for (const auto& f : open["findings"])
    if (f["severity"] == "critical" && incident < 0) incident = f["incident_id"].get<int64_t>();
  ASSERT_GE(incident, 0) << open;

  auto missing = Gpudoctor("ack 99999 --db " + db);
  EXPECT_EQ(missing.exit_code, 64) << missing.output;
  auto acked = Gpudoctor("--json ack " + std::to_string(incident) + " --note \"fixed the CRAC\" --by alice --db " + db);
  ASSERT_EQ(acked.exit_code, 0) << acked.output;
  EXPECT_TRUE(Parse(acked.output)["acknowledged"].get<bool>()) << acked.output;

  ASSERT_EQ(Gpudoctor(agent).exit_code, 0);  // the fault is unchanged
  json all = Parse(Gpudoctor("--json history --findings --since 1h --db " + dir.path() + "/history.db").output);
  bool resolved = false;
  for (const auto& f : all["findings"]) {
    if (f["incident_id"] != incident) continue;
    resolved = f["state"] == "resolved";
    ASSERT_EQ(f["remediations"].size(), 1u) << f;
    EXPECT_EQ(f["remediations"][0]["kind"], "ack");
    EXPECT_EQ(f["remediations"][0]["by"], "alice");
    EXPECT_EQ(f["remediations"][0]["note"], "fixed the CRAC");
  }
  EXPECT_TRUE(resolved) << all;
  json reopened = Parse(Gpudoctor("--json history --findings --open --since 1h --db " + db).output);
  for (const auto& f : reopened["findings"]) EXPECT_NE(f["incident_id"], incident) << f;
  EXPECT_EQ(reopened["findings"].size(), open["findings"].size() - 1) << reopened;

  auto again = Gpudoctor("ack " + std::to_string(incident) + " --db " + db);
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_NE(again.output.find("Nothing to acknowledge"), std::string::npos) << again.output;
}

// `explain` knows every finding id, not only the log's event kinds, with the
// thresholds the config in force gives it.
TEST(ExplainEndToEnd, EveryFindingIdIsExplainedWithItsConfiguredSettings) {
  TempDir dir;
  const std::string config = dir.path() + "/site.toml";
  std::ofstream(config) << "[rules.temperature_high]\nwarning_c = 70\n";
  auto rule = Gpudoctor("--json --config " + config + " explain temperature_high");
  ASSERT_EQ(rule.exit_code, 0) << rule.output;
  json info = Parse(rule.output);
  EXPECT_EQ(info["settings"]["warning_c"], "70");
  EXPECT_EQ(info["category"], "thermal");
  EXPECT_FALSE(info["actions"].empty());
  for (const std::string id : {"facility_cooling", "xid_burst", "xid_recurring", "remediation_repeated",
                               "utilization_stuck", "history_store_failing", "maintenance_due", "agent_history",
                               "diagnostic_failed"}) {
    auto result = Gpudoctor("--json explain " + id);
    EXPECT_EQ(result.exit_code, 0) << id << result.output;
    EXPECT_EQ(Parse(result.output)["id"], id);
  }
  EXPECT_EQ(Gpudoctor("explain gpu_off_bus").exit_code, 0);  // an event kind, as before
  EXPECT_EQ(Gpudoctor("explain no_such_thing").exit_code, 64);
}

// ---- What was not understood, and the nearest valid choices -------------------

// stderr only: the message, exactly, and exit 64.
void ExpectUsage(const std::string& arguments, const std::string& message) {
  auto result = testing::RunShell(testing::Binary() + " " + arguments + " 2>&1 >/dev/null");
  EXPECT_EQ(result.exit_code, 64) << arguments << "\n" << result.output;
  EXPECT_EQ(result.output, message + "\n") << arguments;
}

TEST(UsageEndToEnd, AnUnknownCommandAtAnyLevelNamesTheNearest) {
  ExpectUsage("stauts", "gpudoctor: unknown command 'stauts'. Did you mean 'status'?");
  ExpectUsage("--json tirage", "gpudoctor: unknown command 'tirage'. Did you mean 'triage'?");
  ExpectUsage("diag memtst", "gpudoctor diag: unknown command 'memtst'. Did you mean 'memtest'?");
  ExpectUsage("fleet ofenders", "gpudoctor fleet: unknown command 'ofenders'. Did you mean 'offenders'?");
  ExpectUsage("maintenance dnoe dust_cleaning", "gpudoctor maintenance: unknown command 'dnoe'. Did you mean 'done'?");
  ExpectUsage("diag", "gpudoctor diag: a command or a level is required: 'memtest', 'burn', 'pcie', 'all' or "
                      "--level 1|2|3 (gpudoctor diag --help describes them).");
}

TEST(UsageEndToEnd, AnUnknownOptionNamesTheNearestGlobalOrOwnOption) {
  ExpectUsage("status --simlate x", "gpudoctor status: unknown option '--simlate'. Did you mean '--simulate'?");
  ExpectUsage("check --from-sm x", "gpudoctor check: unknown option '--from-sm'. Did you mean '--from-smi'?");
  ExpectUsage("diag burn --gpus 1", "gpudoctor diag burn: unknown option '--gpus'. Did you mean '--gpu'?");
  ExpectUsage("--jsn fleet offenders", "gpudoctor fleet offenders: unknown option '--jsn'. Did you mean '--json'?");
  ExpectUsage("logs --frobnicate", "gpudoctor logs: unknown option '--frobnicate' (gpudoctor logs --help lists the "
                                   "options).");
}

TEST(UsageEndToEnd, ExplainNamesTheNearestFindingIdEventKindOrXid) {
  ExpectUsage("explain temprature_high",
              "gpudoctor explain: 'temprature_high' is neither an event kind nor a finding id. Did you mean "
              "'temperature_high'? (gpudoctor explain lists the kinds; docs/findings.md the finding ids)");
  ExpectUsage("explain gpu_of_bus",
              "gpudoctor explain: 'gpu_of_bus' is neither an event kind nor a finding id. Did you mean "
              "'gpu_off_bus'? (gpudoctor explain lists the kinds; docs/findings.md the finding ids)");
  ExpectUsage("explain xid 7999", "gpudoctor explain: Xid 7999 is not in the catalog. The nearest known Xids: 79 and "
                                  "99. (gpudoctor explain xid lists them all)");
  ExpectUsage("explain sxid 2034", "gpudoctor explain: SXid 2034 is not in the catalog. The nearest known SXid: "
                                   "20034. (gpudoctor explain sxid lists them all)");
  ExpectUsage("logs --kind gpu_of_bus /dev/null",
              "gpudoctor logs: unknown event kind 'gpu_of_bus'. Did you mean 'gpu_off_bus'? (gpudoctor explain lists "
              "them)");
}

// --kind takes one kind each time it is given: the file after it is a file, not a second kind.
TEST(UsageEndToEnd, AKindBeforeTheFileLeavesTheFileToTheFiles) {
  const std::string file = KernelLog("kernel_panic_pstore.log");
  auto result = Gpudoctor("--json logs --kind kernel_panic " + file);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(Parse(result.output)["kind"], "kernel_panic") << result.output;
  auto two = Gpudoctor("--json logs --kind xid,kernel_panic --kind gpu_off_bus " + file);
  EXPECT_EQ(two.exit_code, 0) << two.output;
}

// A command's --help shows the options every command takes.
TEST(HelpEndToEnd, CheckHelpShowsTheOptionsThatApplyToIt) {
  auto help = Gpudoctor("check --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* option : {"--simulate", "--json", "--config", "--from-smi", "--db"})
    EXPECT_NE(help.output.find(option), std::string::npos) << option << "\n" << help.output;
}

// ---- triage --------------------------------------------------------------------

json Triage(const std::string& arguments) { return Parse(Gpudoctor("--json triage --no-host --no-logs " + arguments).output); }

TEST(TriageEndToEnd, OverheatingIsThermalWithEvidence) {
  json triage = Triage("--simulate " + Example("overheating.toml"));
  const json& verdict = triage["verdict"];
  EXPECT_EQ(verdict["cause"], "thermal") << verdict;
  EXPECT_FALSE(verdict["evidence"].empty());
  EXPECT_FALSE(verdict["next_steps"].empty());
  EXPECT_FALSE(verdict["restart_advisable"].get<bool>());
  bool ruled_out_pcie = false;
  for (const auto& r : verdict["ruled_out"])
    if (r["cause"] == "PCIe/bus") ruled_out_pcie = !r["evidence"].empty();
  EXPECT_TRUE(ruled_out_pcie) << verdict["ruled_out"];
}

TEST(TriageEndToEnd, FallenOffTheBusNeedsHardwareService) {
  json triage = Triage("--simulate " + Example("gpu-fallen-off-bus.toml"));
  const json& verdict = triage["verdict"];
  EXPECT_EQ(verdict["cause"], "PCIe/bus") << verdict;
  EXPECT_TRUE(verdict["hardware_service"].get<bool>());
  EXPECT_FALSE(verdict["evidence"].empty());
  // What the seven answering GPUs show says nothing about the lost one: its
  // temperature and memory stay open until it answers again.
  for (const auto& r : verdict["ruled_out"]) EXPECT_NE(r["cause"], "thermal") << verdict["ruled_out"];
  bool thermal_open = false;
  for (const auto& n : verdict["not_ruled_out"])
    if (n["cause"] == "thermal") thermal_open = n["why"] == "GPU 3 does not answer";
  EXPECT_TRUE(thermal_open) << verdict["not_ruled_out"];
}

// "8 GPU(s), 7 readable" and "All 8 GPUs readable" in one answer contradict each other.
TEST(TriageEndToEnd, ALostGpuIsNeverCountedReadable) {
  auto result = Gpudoctor("--color never triage --no-host --no-logs --simulate " + Example("gpu-fallen-off-bus.toml"));
  EXPECT_NE(result.output.find("8 GPU(s), 7 readable"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("7 of 8 GPUs readable (GPU 3 lost)"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("All 8 GPUs readable"), std::string::npos) << result.output;
}

TEST(TriageEndToEnd, HealthyServerHasNoCause) {
  auto result = Gpudoctor("--json triage --no-host --no-logs --simulate " + Example("healthy-8xh100.toml"));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(Parse(result.output)["verdict"]["cause"], "none");
}

TEST(TriageEndToEnd, DriverMismatchAdvisesACleanRestart) {
  json verdict = Triage("--from-smi " + Sample("005.txt"))["verdict"];
  EXPECT_EQ(verdict["cause"], "driver") << verdict;
  EXPECT_TRUE(verdict["restart_advisable"].get<bool>());
}

TEST(TriageEndToEnd, CapturedXidLogPointsAtItsCause) {
  auto result = Gpudoctor("--json triage --from-smi " + Sample("015.txt") + " --logs " + KernelLog("028.log"));
  json verdict = Parse(result.output)["verdict"];
  EXPECT_NE(verdict["cause"], "none") << verdict;
  bool from_log = false;
  for (const auto& e : verdict["evidence"]) from_log |= e.get<std::string>().starts_with("log: Xid");
  EXPECT_TRUE(from_log) << verdict;
}

TEST(TriageEndToEnd, UnreachableHostIsReported) {
  // Port 1 on the loopback address is closed: the host answers with a refusal.
  json triage = Triage("--simulate " + Example("healthy-8xh100.toml") + " --host 127.0.0.1 --port 1");
  ASSERT_EQ(triage["reachability"].size(), 1u);
  EXPECT_TRUE(triage["reachability"][0]["reachable"].get<bool>()) << triage["reachability"];
  json unresolved = Triage("--simulate " + Example("healthy-8xh100.toml") + " --host no-such-host.invalid");
  ASSERT_EQ(unresolved["reachability"].size(), 1u);
  EXPECT_FALSE(unresolved["reachability"][0]["reachable"].get<bool>());
  EXPECT_EQ(unresolved["verdict"]["cause"], "host");
  EXPECT_EQ(unresolved["status"], "critical");
}

TEST(TriageEndToEnd, TextNamesEverySteps) {
  auto result = Gpudoctor("--color never triage --no-host --no-logs --simulate " + Example("overheating.toml"));
  EXPECT_EQ(result.exit_code, 2);
  for (const char* step : {"1. Reachability", "2. Current state", "3. Logs", "4. GPU state", "5. Verdict", "6. What to do",
                           "Most likely cause: thermal", "Ruled out:"})
    EXPECT_NE(result.output.find(step), std::string::npos) << step << "\n" << result.output;
}

// The agent's history of the overheating server: one-shot agent runs at scenario minutes 1, 4, 7 and 10,
// while GPU 4 climbs 66 -> 75 -> 84 -> 93 °C.
std::string RecordOverheatingHistory(const TempDir& dir) {
  const std::string db = dir.path() + "/history.db";
  for (const char* minute : {"1m", "4m", "7m", "10m"}) {
    Shell(std::string("GPUDOCTOR_FAKE_NOW=") + minute + " " + testing::Binary() + " --simulate " +
          Example("overheating.toml") + " agent --once --log none --db " + db + " >/dev/null 2>&1");
  }
  return db;
}

TEST(TriageEndToEnd, LastHourOfHistoryIsShownAndSupportsTheVerdict) {
  TempDir dir;
  const std::string db = RecordOverheatingHistory(dir);
  json triage = Triage("--simulate " + Example("overheating.toml") + " --db " + db);
  const json& history = triage["history"];
  ASSERT_EQ(history["status"], "read") << history;
  EXPECT_EQ(history["database"], db);
  const json* hot = nullptr;
  for (const auto& gpu : history["gpus"])
    if (gpu["index"] == 4) hot = &gpu;
  ASSERT_NE(hot, nullptr) << history;
  const json& temperature = (*hot)["temperature_c"];
  EXPECT_EQ(temperature["min"], 66.0) << temperature;
  EXPECT_EQ(temperature["mean"], 79.5) << temperature;
  EXPECT_EQ(temperature["max"], 93.0) << temperature;
  EXPECT_EQ(temperature["points"], 4) << temperature;
  EXPECT_TRUE((*hot)["utilization_gpu_percent"].is_object()) << *hot;
  EXPECT_TRUE((*hot)["memory_used_bytes"].is_object()) << *hot;
  bool opened_in_the_hour = false;
  for (const auto& incident : history["findings"]) opened_in_the_hour |= incident["id"] == "temperature_high";
  EXPECT_TRUE(opened_in_the_hour) << history["findings"];

  const json& verdict = triage["verdict"];
  EXPECT_EQ(verdict["cause"], "thermal") << verdict;
  bool climb = false;
  for (const auto& e : verdict["evidence"])
    climb |= e.get<std::string>().starts_with("history: GPU 4 temperature rose from 66 to 93 °C");
  EXPECT_TRUE(climb) << verdict["evidence"];

  auto text = Gpudoctor("--color never triage --no-host --no-logs --simulate " + Example("overheating.toml") +
                        " --db " + db);
  EXPECT_EQ(text.exit_code, 2);
  const size_t step2 = text.output.find("2. Current state"), step3 = text.output.find("3. Logs");
  const size_t hour = text.output.find("History of the last hour, min / mean / max (" + db + "):");
  const size_t gpu4 = text.output.find("GPU 4: temperature 66 / 79.5 / 93 °C, rose 66 -> 93 °C; utilisation ");
  ASSERT_NE(hour, std::string::npos) << text.output;
  ASSERT_NE(gpu4, std::string::npos) << text.output;
  EXPECT_TRUE(step2 < hour && hour < gpu4 && gpu4 < step3) << text.output;
  EXPECT_NE(text.output.find("Findings open in the last hour:"), std::string::npos) << text.output;
}

TEST(TriageEndToEnd, MissingHistoryIsSaidPlainly) {
  const std::string db = "/nonexistent/gpudoctor/history.db";
  auto text = Gpudoctor("--color never triage --no-host --no-logs --simulate " + Example("healthy-8xh100.toml") +
                        " --db " + db);
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("History: none (" + db + " does not exist: no agent has recorded here"),
            std::string::npos)
      << text.output;
  json history = Triage("--simulate " + Example("healthy-8xh100.toml") + " --db " + db)["history"];
  EXPECT_EQ(history["status"], "missing") << history;
  EXPECT_TRUE(history["gpus"].empty());
  EXPECT_TRUE(history["findings"].empty());
}

TEST(TriageEndToEnd, DamagedHistoryIsANoteNotAFailure) {
  TempDir dir;
  const std::string db = dir.path() + "/history.db";
  std::ofstream(db) << "not a history: plain text where an SQLite file was expected\n";
  auto result = Gpudoctor("--json triage --no-host --no-logs --simulate " + Example("healthy-8xh100.toml") +
                          " --db " + db);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  json triage = Parse(result.output);
  EXPECT_EQ(triage["history"]["status"], "unreadable") << triage["history"];
  EXPECT_NE(triage["history"].value("note", "").find(db), std::string::npos) << triage["history"];
  EXPECT_EQ(triage["verdict"]["cause"], "none");
}

// ---- report --------------------------------------------------------------------

TEST(ReportEndToEnd, WritesAValidBundle) {
  TempDir dir;
  const std::string bundle = dir.path() + "/bundle.tar.gz";
  auto result = Gpudoctor("report --no-host --simulate " + Example("overheating.toml") + " --logs " + KernelLog("028.log") +
                    " --output " + bundle);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::string listing = Shell("tar tzf " + bundle + " 2>&1");
  for (const char* name : {"/snapshot.json", "/findings.json", "/versions.txt", "/kernel-log.txt", "/config.toml"})
    EXPECT_NE(listing.find(name), std::string::npos) << name << " not in\n" << listing;
  json findings = Parse(Shell("tar xzOf " + bundle + " --wildcards '*/findings.json'"));
  EXPECT_EQ(findings["status"], "critical");
  std::string log = Shell("tar xzOf " + bundle + " --wildcards '*/kernel-log.txt'");
  EXPECT_NE(log.find("Xid"), std::string::npos);
  // Only the bundle is left behind: the temporary file was renamed.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(ReportEndToEnd, RedactRemovesHostNamesSerialsAndAddresses) {
  TempDir dir;
  const std::string plain = dir.path() + "/plain.tar.gz";
  const std::string redacted = dir.path() + "/redacted.tar.gz";
  const std::string base = "report --no-host --no-logs --simulate " + Example("healthy-8xh100.toml");
  ASSERT_EQ(Gpudoctor(base + " --output " + plain).exit_code, 0);
  ASSERT_EQ(Gpudoctor(base + " --redact --output " + redacted).exit_code, 0);
  json snapshot = Parse(Shell("tar xzOf " + plain + " --wildcards '*/snapshot.json'"));
  const std::string hostname = snapshot.value("hostname", "");
  ASSERT_FALSE(hostname.empty());
  std::string serial, uuid;
  for (const auto& gpu : snapshot["gpus"]) {
    if (gpu["serial"].is_string()) serial = gpu["serial"];
    if (gpu["uuid"].is_string()) uuid = gpu["uuid"];
  }
  const std::string everything = Shell("tar xzOf " + redacted);
  EXPECT_EQ(everything.find(hostname), std::string::npos) << hostname;
  if (!serial.empty()) {
    EXPECT_EQ(everything.find(serial), std::string::npos) << serial;
  }
  if (!uuid.empty()) {
    EXPECT_EQ(everything.find(uuid), std::string::npos) << uuid;
  }
  EXPECT_NE(everything.find("redacted-host"), std::string::npos);
}

TEST(ReportEndToEnd, UnwritableOutputExits73) {
  auto result = Gpudoctor("report --no-host --no-logs --simulate " + Example("healthy-8xh100.toml") +
                    " --output /nonexistent-dir/bundle.tar.gz");
  EXPECT_EQ(result.exit_code, 73);
}

}  // namespace
}  // namespace gpudoctor
