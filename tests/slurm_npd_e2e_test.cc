// `gpudoctor slurm` and `gpudoctor npd` end to end: the built binary on the
// example scenarios, with fake `sinfo` and `scontrol` scripts that print a
// canned cluster and record the command lines they were given.
// (tests/slurm/slurm_daemons_test.sh runs `slurm` against real daemons.)

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/run_binary.h"

namespace gpudoctor {
namespace {

using nlohmann::json;
using testing::Example;
using testing::RunResult;

const std::string kCritical = Example("gpu-fallen-off-bus.toml");
const std::string kHealthy = Example("healthy-8xh100.toml");
const std::string kFourIdleNodes =
    "node1|debug|idle|none\nnode2|debug|idle|none\nnode3|debug|idle|none\nnode4|debug|idle|none\n";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool StartsWith(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

json Parse(const std::string& text) {
  auto parsed = json::parse(text, nullptr, false);
  EXPECT_FALSE(parsed.is_discarded()) << text;
  return parsed.is_discarded() ? json::object() : parsed;
}

// A scratch folder with fake sinfo and scontrol: sinfo prints sinfo.out and
// exits with sinfo.status (0 when missing); each records its arguments, one a
// line, in <name>.argv (scontrol appends, one call after another).
class FakeSlurm : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpudoctor-slurm-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    WriteFile(dir_ + "/sinfo",
              "#!/bin/sh\nd=$(dirname \"$0\")\nprintf '%s\\n' \"$@\" > \"$d/sinfo.argv\"\ncat \"$d/sinfo.out\"\n"
              "[ -f \"$d/sinfo.status\" ] && exit \"$(cat \"$d/sinfo.status\")\"\nexit 0\n",
              0755);
    WriteFile(dir_ + "/scontrol",
              "#!/bin/sh\nd=$(dirname \"$0\")\nprintf '%s\\n' \"$@\" >> \"$d/scontrol.argv\"\n"
              "[ -f \"$d/scontrol.status\" ] && { echo 'slurm_update error: Invalid node name specified' >&2;"
              " exit \"$(cat \"$d/scontrol.status\")\"; }\nexit 0\n",
              0755);
    Cluster(kFourIdleNodes);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Cluster(const std::string& sinfo_output) { WriteFile(dir_ + "/sinfo.out", sinfo_output); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::vector<std::string> ScontrolArgv() const { return Lines(ReadFile(Path("scontrol.argv"))); }
  bool ScontrolRan() const { return std::filesystem::exists(Path("scontrol.argv")); }

  // `gpudoctor slurm` on node1 of the fake cluster; stdout and stderr together.
  RunResult Slurm(const std::string& scenario, const std::string& arguments, const std::string& global = "") {
    return testing::RunGpudoctor(global + " --color never slurm --simulate " + scenario +
                                     " --no-host --no-logs --node node1 --sinfo " + Path("sinfo") + " --scontrol " +
                                     Path("scontrol") + " " + arguments,
                                 testing::Stderr::kCapture);
  }
  json SlurmJson(const std::string& scenario, const std::string& arguments) {
    RunResult result = testing::RunGpudoctor("--json slurm --simulate " + scenario +
                                             " --no-host --no-logs --node node1 --sinfo " + Path("sinfo") +
                                             " --scontrol " + Path("scontrol") + " " + arguments);
    return Parse(result.output);
  }

  std::string dir_;
};

// ---- slurm ---------------------------------------------------------------------

TEST_F(FakeSlurm, ADryRunSaysWhatItWouldDoAndRunsNoScontrol) {
  RunResult result = Slurm(kCritical, "--max-drain-share 0.5");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("would drain node1: gpudoctor: gpu_lost gpu 3: GPU 3 has fallen off the bus"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(ScontrolRan());
  EXPECT_EQ(Lines(ReadFile(Path("sinfo.argv"))),
            (std::vector<std::string>{"--noheader", "--Node", "--format=%N|%R|%T|%E"}));
}

TEST_F(FakeSlurm, DrainPassesTheReasonAsOneArgument) {
  RunResult result = Slurm(kCritical, "--drain --max-drain-share 0.5");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("drained node1: gpudoctor:"), std::string::npos) << result.output;
  EXPECT_EQ(ScontrolArgv(), (std::vector<std::string>{"update", "nodename=node1", "state=drain",
                                                       "reason=gpudoctor: gpu_lost gpu 3: GPU 3 has fallen off the bus"}));
}

TEST_F(FakeSlurm, TheReasonNamesTheFirstCriticalFindingAndCountsTheRest) {
  json result = SlurmJson(Example("ecc-dbe-row-remap.toml"), "--max-drain-share 0.5");
  EXPECT_EQ(result["reason"],
            "gpudoctor: ecc_uncorrectable gpu 6: 2 uncorrectable ECC errors since the driver loaded (+1 more)");
  EXPECT_EQ(result["findings"].size(), 4u);  // the warnings too
}

TEST_F(FakeSlurm, TheCircuitBreakerHoldsAndSaysWhy) {
  Cluster("node1|debug|idle|none\nnode2|debug|drained|gpudoctor: test\nnode3|debug|draining|gpudoctor: test\n"
          "node4|debug|drained|admin: maintenance\n");
  RunResult result = Slurm(kCritical, "--drain --max-drain-share 0.5");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("circuit breaker: 2 of 4 nodes in partition debug are already drained by gpudoctor; "
                               "draining node1 would make 75% > 50%; not draining"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(ScontrolRan());

  json held = SlurmJson(kCritical, "--drain --max-drain-share 0.5");
  EXPECT_EQ(held["action"], "held_by_breaker");
  EXPECT_EQ(held["breaker"], json({{"partition", "debug"},
                                   {"nodes", 4},
                                   {"drained_by_gpudoctor", 2},
                                   {"max_share", 0.5},
                                   {"allowed", false}}));

  // node4 is the admin's, not ours: 3 of 4 is within 0.8.
  EXPECT_EQ(Slurm(kCritical, "--drain --max-drain-share 0.8").exit_code, 2);
  EXPECT_EQ(ScontrolArgv().at(2), "state=drain");
}

TEST_F(FakeSlurm, TheDefaultShareHoldsAFourNodePartition) {
  RunResult result = Slurm(kCritical, "--drain");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.output.find("would make 25% > 10%; not draining"), std::string::npos) << result.output;
  EXPECT_FALSE(ScontrolRan());
}

TEST_F(FakeSlurm, JsonHasEveryKey) {
  json result = SlurmJson(kCritical, "--max-drain-share 0.5");
  for (const char* key :
       {"node", "healthy", "worst_severity", "findings", "action", "reason", "message", "breaker", "dry_run", "prolog"})
    EXPECT_TRUE(result.contains(key)) << key << " in " << result.dump();
  EXPECT_EQ(result["node"], "node1");
  EXPECT_EQ(result["healthy"], false);
  EXPECT_EQ(result["worst_severity"], "critical");
  EXPECT_EQ(result["action"], "would_drain");
  EXPECT_EQ(result["dry_run"], true);
  EXPECT_EQ(result["reason"], "gpudoctor: gpu_lost gpu 3: GPU 3 has fallen off the bus");
  ASSERT_FALSE(result["findings"].empty());
  EXPECT_EQ(result["findings"][0],
            json({{"id", "gpu_lost"}, {"severity", "critical"}, {"gpu", 3}, {"summary", "GPU 3 has fallen off the bus"}}));
  EXPECT_EQ(result["breaker"]["allowed"], true);
}

TEST_F(FakeSlurm, ResumesOnlyANodeGpudoctorDrained) {
  Cluster("node1|debug|drained|gpudoctor: gpu_lost gpu 3: GPU 3 has fallen off the bus\nnode2|debug|idle|none\n");
  RunResult dry = Slurm(kHealthy, "");
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("would resume node1"), std::string::npos) << dry.output;
  EXPECT_FALSE(ScontrolRan());
  EXPECT_EQ(SlurmJson(kHealthy, "")["action"], "would_resume");

  RunResult resumed = Slurm(kHealthy, "--drain");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed node1"), std::string::npos) << resumed.output;
  EXPECT_EQ(ScontrolArgv(), (std::vector<std::string>{"update", "nodename=node1", "state=resume"}));
}

TEST_F(FakeSlurm, NeverTouchesANodeAnAdminDrained) {
  Cluster("node1|debug|drained|admin: maintenance\nnode2|debug|idle|none\n");
  RunResult healthy = Slurm(kHealthy, "--drain");
  EXPECT_EQ(healthy.exit_code, 0) << healthy.output;
  RunResult critical = Slurm(kCritical, "--drain --max-drain-share 1");
  EXPECT_EQ(critical.exit_code, 2) << critical.output;
  EXPECT_NE(critical.output.find("already drained"), std::string::npos) << critical.output;
  EXPECT_FALSE(ScontrolRan());
}

TEST_F(FakeSlurm, PrologExitStatuses) {
  // A critical finding fails the prolog, after draining with gpudoctor's reason.
  RunResult failed = Slurm(kCritical, "--prolog --drain --max-drain-share 1");
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_EQ(ScontrolArgv().at(2), "state=drain");
  // While the breaker holds, the job starts, and stderr says why.
  RunResult held = Slurm(kCritical, "--prolog --max-drain-share 0.1");
  EXPECT_EQ(held.exit_code, 0) << held.output;
  EXPECT_NE(held.output.find("circuit breaker"), std::string::npos) << held.output;
  // Healthy: exit 0 without asking Slurm anything.
  std::filesystem::remove(Path("sinfo.argv"));
  EXPECT_EQ(Slurm(kHealthy, "--prolog --drain").exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(Path("sinfo.argv")));
}

// --diag-level: the GPUs are stressed after the check. GPU 1 computes a
// wrong product: a critical finding that fails the prolog and drains the
// node; GPU 0 runs a job's process: not tested, and not a fault.
TEST_F(FakeSlurm, ADiagLevelStressesTheGpusAndAWrongProductFailsTheProlog) {
  const std::string scenario = Path("wrong-product.toml");
  WriteFile(scenario,
            "gpu_count = 2\n[gpu.0]\nprocesses = [{ pid = 4242, name = \"python\", used_memory_mib = 100 }]\n"
            "[cuda]\nmemory_mib = 8\n[[cuda.fault]]\ngpu = 1\nwrong_product = { row = 3, col = 7, delta = 1.0 }\n");
  RunResult result = testing::RunGpudoctor("--json slurm --simulate " + scenario +
                                           " --no-host --no-logs --node node1 --sinfo " + Path("sinfo") +
                                           " --scontrol " + Path("scontrol") +
                                           " --prolog --drain --max-drain-share 1 --diag-level 1");
  EXPECT_EQ(result.exit_code, 1) << result.output;
  const json outcome = Parse(result.output);
  EXPECT_EQ(outcome["diag"]["level"], 1);
  EXPECT_EQ(outcome["diag"]["ran"], true);
  EXPECT_NE(outcome["diag"]["summary"].get<std::string>().find("FAULTY (GPU 1 burn)"), std::string::npos)
      << outcome.dump(2);
  EXPECT_NE(outcome["diag"]["notes"].dump().find("GPU 0 memtest could_not_run: 1 process is running on it"),
            std::string::npos)
      << outcome.dump(2);
  const json& finding = outcome["findings"][0];
  EXPECT_EQ(finding["id"], "diagnostic_failed");
  EXPECT_EQ(finding["severity"], "critical");
  EXPECT_EQ(finding["gpu"], 1);
  EXPECT_EQ(ScontrolArgv().at(2), "state=drain");
  EXPECT_TRUE(StartsWith(ScontrolArgv().at(3), "reason=gpudoctor: diagnostic_failed gpu 1: failed gpudoctor diag burn "
                                               "(level 1): "))
      << ScontrolArgv().at(3);
  EXPECT_NE(ScontrolArgv().at(3).find("wrong matrix product"), std::string::npos) << ScontrolArgv().at(3);
}

TEST_F(FakeSlurm, SlurmProgramsMissingOrFailingAre69) {
  RunResult missing = testing::RunGpudoctor("slurm --simulate " + kCritical + " --no-host --no-logs --node node1 --sinfo " +
                                                Path("no-such-sinfo"),
                                            testing::Stderr::kCapture);
  EXPECT_EQ(missing.exit_code, 69) << missing.output;
  EXPECT_NE(missing.output.find("no-such-sinfo: not found"), std::string::npos) << missing.output;

  WriteFile(Path("sinfo.status"), "1");
  Cluster("slurm_load_partitions: Unable to contact slurm controller (connect failure)\n");
  RunResult failing = Slurm(kCritical, "");
  EXPECT_EQ(failing.exit_code, 69) << failing.output;
  EXPECT_NE(failing.output.find("exited with status 1"), std::string::npos) << failing.output;
  std::filesystem::remove(Path("sinfo.status"));

  Cluster(kFourIdleNodes);
  WriteFile(Path("scontrol.status"), "1");
  RunResult refused = Slurm(kCritical, "--drain --max-drain-share 1");
  EXPECT_EQ(refused.exit_code, 69) << refused.output;
  EXPECT_NE(refused.output.find("could not drain node1"), std::string::npos) << refused.output;
}

TEST_F(FakeSlurm, AnUnknownNodeIs69AndAWrongPartition64) {
  Cluster("node2|debug|idle|none\n");
  RunResult unknown = Slurm(kCritical, "");
  EXPECT_EQ(unknown.exit_code, 69) << unknown.output;
  EXPECT_NE(unknown.output.find("sinfo lists no node named node1"), std::string::npos) << unknown.output;

  Cluster(kFourIdleNodes);
  RunResult partition = Slurm(kCritical, "--partition gpu");
  EXPECT_EQ(partition.exit_code, 64) << partition.output;
  EXPECT_NE(partition.output.find("not in partition gpu"), std::string::npos) << partition.output;
  EXPECT_EQ(Slurm(kCritical, "--max-drain-share 1.5").exit_code, 64);
}

TEST_F(FakeSlurm, TheNodeNameComesFromSlurmd) {
  RunResult result = testing::RunGpudoctor("--json slurm --simulate " + kCritical + " --no-host --no-logs --sinfo " +
                                               Path("sinfo") + " --max-drain-share 0.5",
                                           testing::Stderr::kDiscard, "SLURMD_NODENAME=node3");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(Parse(result.output)["node"], "node3");
}

// A reason or node name from Slurm is any bytes an admin typed: --json stays
// JSON, and text output shows escapes instead of obeying them.
TEST_F(FakeSlurm, BytesFromSlurmNeverLoseTheAnswer) {
  Cluster("node1|debug|drained|admin: bad \xff\xfe byte \x1b[2J\nnode2|debug|idle|none\n");
  RunResult result = testing::RunGpudoctor("--json slurm --simulate " + kCritical +
                                           " --no-host --no-logs --node node1 --sinfo " + Path("sinfo") +
                                           " --scontrol " + Path("scontrol") + " --max-drain-share 1");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  json parsed = Parse(result.output);
  EXPECT_EQ(parsed["reason"], "admin: bad \xef\xbf\xbd\xef\xbf\xbd byte \x1b[2J") << parsed.dump(2);
  RunResult text = Slurm(kCritical, "--max-drain-share 1");
  EXPECT_EQ(text.exit_code, 2) << text.output;
  EXPECT_EQ(text.output.find('\x1b'), std::string::npos) << text.output;
}

TEST_F(FakeSlurm, ANonsenseShareOrAnEmptyNodeNameIsAUsageError) {
  for (const char* share : {"nan", "-0.1", "1.5", "inf", "half"}) {
    RunResult result = Slurm(kCritical, std::string("--max-drain-share ") + share);
    EXPECT_EQ(result.exit_code, 64) << share << ": " << result.output;
  }
  RunResult empty = testing::RunGpudoctor("slurm --simulate " + kCritical + " --no-host --no-logs --node '' --sinfo " +
                                              Path("sinfo"),
                                          testing::Stderr::kCapture);
  EXPECT_EQ(empty.exit_code, 64) << empty.output;
  EXPECT_NE(empty.output.find("an empty node name"), std::string::npos) << empty.output;
}

TEST(SlurmCommand, HelpTeaches) {
  RunResult help = testing::RunGpudoctor("slurm --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* text : {"--drain", "--max-drain-share", "Circuit breaker", "Exit status", "HealthCheckProgram",
                           "would drain node1"})
    EXPECT_NE(help.output.find(text), std::string::npos) << text;
}

// ---- npd ---------------------------------------------------------------------

RunResult Npd(const std::string& arguments) { return testing::RunGpudoctor("npd --no-host --no-logs " + arguments); }

TEST(NpdCommand, HealthyIsOkWithOneLine) {
  RunResult result = Npd("--simulate " + kHealthy);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.output, "gpudoctor: no critical finding (worst: ok)\n");
}

TEST(NpdCommand, ACriticalFindingIsNonOkAndNamedFirst) {
  RunResult result = Npd("--simulate " + kCritical);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output, "gpu 3: gpu_lost: GPU 3 has fallen off the bus\n");
}

TEST(NpdCommand, TheMessageFitsNpdsCut) {
  for (const char* scenario : {"ecc-dbe-row-remap.toml", "hgx-fabric-fault.toml", "pcie-downtrained.toml",
                               "cooling-failure.toml", "overheating.toml"}) {
    for (int limit : {80, 40}) {
      RunResult result = Npd("--severity warning --max-output-length " + std::to_string(limit) + " --simulate " +
                             Example(scenario));
      EXPECT_EQ(result.exit_code, 1) << scenario;
      std::vector<std::string> lines = Lines(result.output);
      ASSERT_EQ(lines.size(), 1u) << result.output;
      EXPECT_LE(lines[0].size(), static_cast<size_t>(limit)) << lines[0];
      EXPECT_GE(lines[0].size(), 10u) << lines[0];
    }
  }
  // "GPU 6: ..." in the summary is not said twice; the count of the rest survives the cut.
  RunResult ecc = Npd("--simulate " + Example("ecc-dbe-row-remap.toml"));
  EXPECT_TRUE(ecc.output.starts_with("gpu 6: ecc_uncorrectable: 2 uncorrectable ECC errors")) << ecc.output;
  EXPECT_NE(ecc.output.find(" more)\n"), std::string::npos) << ecc.output;
}

TEST(NpdCommand, SeverityChoosesWhatIsAProblem) {
  // memory-leak.toml at 60m, its GPU 2 full, has a warning and nothing critical.
  auto full = [](const std::string& arguments) {
    return testing::RunGpudoctor("npd --no-host --no-logs " + arguments, testing::Stderr::kDiscard,
                                 "GPUDOCTOR_FAKE_NOW=60m");
  };
  EXPECT_EQ(full("--simulate " + Example("memory-leak.toml")).exit_code, 0);
  RunResult warning = full("--severity warning --simulate " + Example("memory-leak.toml"));
  EXPECT_EQ(warning.exit_code, 1);
  EXPECT_TRUE(warning.output.starts_with("gpu 2: memory_high:")) << warning.output;
  EXPECT_EQ(Npd("--severity info --simulate " + kHealthy).exit_code, 64);
}

TEST(NpdCommand, ACheckThatCannotRunIsUnknown) {
  const std::string config = (std::filesystem::temp_directory_path() / "gpudoctor-npd-bad.toml").string();
  WriteFile(config, "[thresholds\nthis is not toml");
  RunResult result = Npd("--config " + config + " --simulate " + kHealthy);
  std::filesystem::remove(config);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(result.output.starts_with("gpudoctor cannot check: ")) << result.output;
  EXPECT_EQ(Lines(result.output).size(), 1u);
  EXPECT_EQ(Npd("--simulate " + Example("no-such-scenario.toml")).exit_code, 2);
  // A --config that is not there: NPD shows the line, so the line says why.
  RunResult missing = Npd("--config /nonexistent/gpudoctor.toml --simulate " + kHealthy);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_EQ(Lines(missing.output),
            (std::vector<std::string>{"gpudoctor cannot check: --config: /nonexistent/gpudoctor.toml: no such file"}));
}

TEST(NpdCommand, JsonIsOneObjectOnOneLine) {
  RunResult result = testing::RunGpudoctor("--json npd --no-host --no-logs --simulate " + kCritical);
  EXPECT_EQ(result.exit_code, 1);
  ASSERT_EQ(Lines(result.output).size(), 1u);
  json parsed = Parse(result.output);
  EXPECT_EQ(parsed["status"], "problem");
  EXPECT_EQ(parsed["message"], "gpu 3: gpu_lost: GPU 3 has fallen off the bus");
  EXPECT_EQ(parsed["worst_severity"], "critical");
  EXPECT_EQ(parsed["findings"][0]["id"], "gpu_lost");
}

}  // namespace
}  // namespace gpudoctor
