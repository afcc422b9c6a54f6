// Every option that names an input file, end to end: the built binary given a
// missing path, an unreadable file, a directory, a FIFO, a socket, a device,
// a file over the option's size limit and one in no known format. Each run is
// under `timeout`, so a command that wrongly waits on a FIFO fails its test
// instead of hanging the suite.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/input_test_support.h"
#include "tests/run_binary.h"

namespace gpudoctor {
namespace {

using input_testing::RefusedInput;
using input_testing::RefusedInputs;
using testing::Example;
using testing::RunResult;
using testing::Stderr;

constexpr const char* kTimeLimit = "timeout 60";

std::string Source(const std::string& relative) { return std::string(GPUDOCTOR_SOURCE_DIR) + "/" + relative; }

// The binary under the time limit, stderr captured; as the user nobody when
// `unprivileged` and this process is root, where permissions do not bind.
RunResult Gpudoctor(const std::string& arguments, bool unprivileged = false) {
  std::string prefix = kTimeLimit;
  if (unprivileged && !input_testing::PermissionsApply())
    prefix += " setpriv --reuid=" + std::to_string(input_testing::kNobody) + " --regid=" +
              std::to_string(input_testing::kNobody) + " --clear-groups";
  return testing::RunGpudoctor(arguments, Stderr::kCapture, prefix);
}

void ReplaceAll(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

// A command line with {path} where the input's path goes ({healthy}: a
// healthy scenario, {log}: a kernel log, {db}: a history, {out}: a bundle).
struct NamedInput {
  std::string option;   // how the test names it
  std::string command;  // "check --from-smi {path}"
  std::string message;  // what comes before "PATH: reason" in the message
};

class InputsEndToEnd : public ::testing::Test {
 protected:
  InputsEndToEnd() {
    // Copies the unprivileged runs (as nobody) can read wherever the source tree is (under a
    // root-only /root, say): a refusal must come from the input under test, not from these.
    std::filesystem::permissions(readable_.path(), std::filesystem::perms::owner_all |
                                                       std::filesystem::perms::group_read |
                                                       std::filesystem::perms::group_exec |
                                                       std::filesystem::perms::others_read |
                                                       std::filesystem::perms::others_exec);
    healthy_ = Copy(Example("healthy-8xh100.toml"));
    log_ = Copy(Source("testdata/kernel_logs/047.log"));
    database_ = refused_.dir().File("history.db");
    output_ = refused_.dir().File("report.tar.gz");
  }

  std::string Expand(std::string command, const std::string& path) const {
    ReplaceAll(command, "{healthy}", healthy_);
    ReplaceAll(command, "{log}", log_);
    ReplaceAll(command, "{db}", database_);
    ReplaceAll(command, "{out}", output_);
    ReplaceAll(command, "{path}", "'" + path + "'");
    return command;
  }

  // Every named input, each given every refused kind of path: exit 66 and the reason.
  void ExpectEveryRefusal(const std::vector<NamedInput>& inputs) {
    for (const NamedInput& input : inputs) {
      for (const RefusedInput& refused : AllKinds()) {
        const RunResult run = Gpudoctor(Expand(input.command, refused.path), refused.kind == "unreadable");
        EXPECT_EQ(run.exit_code, 66) << input.option << " given a " << refused.kind << ":\n" << run.output;
        EXPECT_NE(run.output.find(input.message + refused.path + ": " + refused.message), std::string::npos)
            << input.option << " given a " << refused.kind << ":\n"
            << run.output;
        // An input that cannot be read is an error and nothing else ("No GPU or host events found" would
        // say the log was read and held none).
        EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1)
            << input.option << " given a " << refused.kind << " says more than the refusal:\n"
            << run.output;
      }
    }
  }

  // With the unreadable file also when running as root (run as nobody then), where nobody can reach the
  // build tree: under a root-only folder (/root, in a fresh chroot) the binary starts but cannot see its own
  // modules, and every run would fail for that reason instead of the input's.
  std::vector<RefusedInput> AllKinds() const {
    std::vector<RefusedInput> kinds = refused_.All();
    if (!input_testing::PermissionsApply() && NobodyReachesTheBuild()) kinds.push_back(refused_.Unreadable());
    return kinds;
  }

  static bool NobodyReachesTheBuild() {
    static const bool reaches = [] {
      const std::string module = std::string(GPUDOCTOR_BINARY_DIR) + "/bin/libgpudoctor_fake_nvml.so";
      const RunResult run = testing::RunShell("setpriv --reuid=" + std::to_string(input_testing::kNobody) +
                                              " --regid=" + std::to_string(input_testing::kNobody) +
                                              " --clear-groups test -r '" + module + "' && echo yes");
      if (run.output != "yes\n") {
        std::fprintf(stderr, "NOTE: the unreadable-input case is not run: the user nobody cannot read %s\n",
                     module.c_str());
      }
      return run.output == "yes\n";
    }();
    return reaches;
  }

  // A sparse file one byte over `limit`: costs no disk, and must not be read.
  std::string Oversized(const std::string& name, uint64_t limit) const {
    const std::string path = refused_.dir().Write(name, "x");
    std::filesystem::resize_file(path, limit + 1);
    return path;
  }

  std::string Copy(const std::string& source) const {
    const std::string copy = readable_.File(std::filesystem::path(source).filename());
    std::filesystem::copy_file(source, copy);
    std::filesystem::permissions(copy, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                           std::filesystem::perms::group_read | std::filesystem::perms::others_read);
    return copy;
  }

  testing::ScratchDir readable_;
  RefusedInputs refused_;
  std::string healthy_, log_, database_, output_;
};

TEST_F(InputsEndToEnd, ConfigIsRefusedTheSameByEveryCommand) {
  ExpectEveryRefusal({
      {"check --config", "check --no-host --no-logs --simulate {healthy} --config {path}", "--config: "},
      {"status --config", "status --simulate {healthy} --config {path}", "--config: "},
      {"triage --config", "triage --no-host --no-logs --simulate {healthy} --db {db} --config {path}", "--config: "},
      {"report --config", "report --no-host --no-logs --simulate {healthy} -o {out} --config {path}", "--config: "},
      {"logs --config", "logs {log} --config {path}", "--config: "},
      {"explain --config", "explain xid 79 --config {path}", "--config: "},
      {"history --config", "history --db {db} --config {path}", "--config: "},
      {"agent --config", "agent --once --log none --db {db} --simulate {healthy} --config {path}", "--config: "},
  });
}

TEST_F(InputsEndToEnd, CapturesScenariosAndLogsAreRefusedWithTheReason) {
  ExpectEveryRefusal({
      {"--simulate", "status --simulate {path}", "--simulate: "},
      {"check --from-smi", "check --from-smi {path}", "--from: "},
      {"status --from-smi", "status --from-smi {path}", "--from: "},
      {"triage --from-smi", "triage --from-smi {path} --db {db}", "--from: "},
      {"report --from-smi", "report --from-smi {path} -o {out}", "--from: "},
      {"check --logs", "check --no-host --simulate {healthy} --logs {path}", "--logs: "},
      {"triage --logs", "triage --no-host --simulate {healthy} --db {db} --logs {path}", "--logs: "},
      {"report --logs", "report --no-host --simulate {healthy} -o {out} --logs {path}", "--logs: "},
      {"logs FILE", "logs {path}", "gpudoctor logs: "},
      {"logs --follow FILE", "logs --follow {path}", "gpudoctor logs: "},
      {"logs --catalog", "logs {log} --catalog {path}", "--catalog: "},
  });
}

// Of several logs, one that cannot be read fails the run (66) and the others
// are still reported; "no events" is never said of a read that was not whole.
TEST_F(InputsEndToEnd, LogsSaysNoEventsOnlyOfEveryFileRead) {
  const std::string empty = readable_.Write("empty.log", "nothing from the GPUs here\n");
  const RunResult both = Gpudoctor("logs /nonexistent/kern.log " + empty);
  EXPECT_EQ(both.exit_code, 66) << both.output;
  EXPECT_NE(both.output.find("gpudoctor logs: /nonexistent/kern.log: no such file"), std::string::npos) << both.output;
  EXPECT_NE(both.output.find(empty + ": 1 lines, 0 events"), std::string::npos) << both.output;
  EXPECT_EQ(both.output.find("No GPU or host events found"), std::string::npos) << both.output;
  const RunResult read = Gpudoctor("logs " + empty);
  EXPECT_EQ(read.exit_code, 0) << read.output;
  EXPECT_NE(read.output.find("No GPU or host events found."), std::string::npos) << read.output;
}

TEST_F(InputsEndToEnd, AgentTokenFileAndHistoryDatabaseAreRefusedWithTheReason) {
  ExpectEveryRefusal({
      {"agent --token-file", "agent --once --log none --db {db} --simulate {healthy} --token-file {path}",
       "--token-file: cannot read "},
      {"history --db", "history --db {path}", "--db: "},
  });
}

TEST_F(InputsEndToEnd, TriageGoesOnWithoutAHistoryItCannotRead) {
  for (const RefusedInput& refused : refused_.All()) {
    const RunResult run =
        Gpudoctor(Expand("--json triage --no-host --no-logs --simulate {healthy} --db {path}", refused.path));
    EXPECT_EQ(run.exit_code, 0) << refused.kind << ":\n" << run.output;
    auto json = nlohmann::json::parse(run.output, nullptr, false);
    ASSERT_FALSE(json.is_discarded()) << refused.kind << ":\n" << run.output;
    if (refused.kind == "missing") {
      EXPECT_EQ(json["history"]["status"], "missing");
    } else {
      EXPECT_EQ(json["history"]["status"], "unreadable") << refused.kind;
      EXPECT_EQ(json["history"]["note"], refused.path + ": " + refused.message);
    }
  }
}

TEST_F(InputsEndToEnd, OversizedInputsFailAtOnceNamingTheLimit) {
  struct Case {
    std::string command;
    std::string message;
  };
  const Case cases[] = {
      {"check --no-host --no-logs --simulate {healthy} --config " + Oversized("huge.toml", 200ull << 20),
       "209715201 bytes, over the 1 MiB limit"},
      {"logs {log} --config " + Oversized("config.toml", 1 << 20), "1048577 bytes, over the 1 MiB limit"},
      {"check --from-smi " + Oversized("huge.xml", 64ull << 20), "over the 64 MiB limit"},
      {"status --simulate " + Oversized("huge-scenario.toml", 16 << 20), "over the 16 MiB limit"},
      {"logs {log} --catalog " + Oversized("catalog.toml", 4 << 20), "over the 4 MiB limit"},
      {"agent --once --log none --db {db} --simulate {healthy} --token-file " + Oversized("token", 64 << 10),
       "over the 64 KiB limit"},
  };
  for (const Case& c : cases) {
    const RunResult run = Gpudoctor(Expand(c.command, ""));
    EXPECT_EQ(run.exit_code, 65) << c.command << ":\n" << run.output;
    EXPECT_NE(run.output.find(c.message), std::string::npos) << c.command << ":\n" << run.output;
  }
}

TEST_F(InputsEndToEnd, InputsInNoKnownFormatAreDataErrors) {
  const std::string text = refused_.dir().Write("notes.txt", "hello, this is neither TOML nor a capture [\n");
  for (const std::string command :
       {"check --no-host --no-logs --simulate {healthy} --config {path}", "check --from-smi {path}",
        "status --simulate {path}", "logs {log} --catalog {path}", "history --db {path}"}) {
    const RunResult run = Gpudoctor(Expand(command, text));
    EXPECT_EQ(run.exit_code, 65) << command << ":\n" << run.output;
    EXPECT_NE(run.output.find(text), std::string::npos) << command << ":\n" << run.output;
  }
}

TEST_F(InputsEndToEnd, LogsReadAPipeWhenAskedWithADash) {
  const std::string line = "[ 5.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.";
  const RunResult run = testing::RunGpudoctor("--json logs -", Stderr::kCapture,
                                              "printf '%s\\n' '" + line + "' | " + kTimeLimit);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("\"xid\":79"), std::string::npos) << run.output;
}

// ---- captures that end early -------------------------------------------------

TEST_F(InputsEndToEnd, ATruncatedCaptureIsNeverOk) {
  std::ifstream in(Source("testdata/nvidia_smi/h100_x2_q.xml"), std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(whole.size(), 24931u);
  struct Cut {
    size_t bytes;
    int exit_code;  // unknown (3), or critical (2) once the hot GPU 1 is in the part kept
    const char* status;
  };
  for (const Cut& cut : {Cut{3000, 3, "unknown"}, Cut{12000, 3, "unknown"}, Cut{24000, 2, "critical"}}) {
    const std::string path =
        refused_.dir().Write("cut-" + std::to_string(cut.bytes) + ".xml", whole.substr(0, cut.bytes));
    const RunResult run = Gpudoctor("--json check --from-smi " + path);
    EXPECT_EQ(run.exit_code, cut.exit_code) << "cut at " << cut.bytes << ":\n" << run.output;
    auto json = nlohmann::json::parse(run.output, nullptr, false);
    ASSERT_FALSE(json.is_discarded()) << run.output;
    EXPECT_EQ(json["status"], cut.status);
    bool reported = false;
    for (const auto& finding : json["findings"])
      reported |= finding["id"] == "capture_incomplete" && finding["severity"] == "unknown";
    EXPECT_TRUE(reported) << "cut at " << cut.bytes << ":\n" << run.output;
  }
  const RunResult human = Gpudoctor("--color never check --from-smi " + refused_.dir().File("cut-3000.xml"));
  EXPECT_EQ(human.output.find("no problems found"), std::string::npos) << human.output;
  EXPECT_NE(human.output.find("it names 2 attached GPUs but describes 1"), std::string::npos) << human.output;

  const RunResult full = Gpudoctor("--json check --from-smi " + Source("testdata/nvidia_smi/h100_x2_q.xml"));
  EXPECT_EQ(full.output.find("\"severity\": \"unknown\""), std::string::npos) << full.output;
}

// ---- history on read-only media ------------------------------------------------

TEST_F(InputsEndToEnd, HistoryIsReadFromReadOnlyMedia) {
  const std::string written = refused_.dir().File("agent.db");
  ASSERT_EQ(Gpudoctor("agent --once --log none --db " + written + " --simulate " + healthy_).exit_code, 0);
  input_testing::ReadOnlyMedia media;
  if (!media.Mount()) GTEST_SKIP() << "mounting a tmpfs needs root";
  media.CopyIn(written);
  ASSERT_TRUE(media.MakeReadOnly());
  const RunResult run = Gpudoctor("--json history --db " + media.File("agent.db"));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("\"gpus\""), std::string::npos) << run.output;
  EXPECT_FALSE(std::filesystem::exists(media.File("agent.db-shm")));
}

}  // namespace
}  // namespace gpudoctor
