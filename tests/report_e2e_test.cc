// `gpudoctor report` end to end: no secret from the config or the logs reaches
// the support bundle, with or without --redact, while the setup stays
// readable; and the bundle is private whatever the umask.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "tests/run_binary.h"

namespace gpudoctor {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// Every place a secret can stand in the config, and a log line with credentials.
constexpr std::string_view kConfig = R"toml(
[host]
processes = ["nvidia-persistenced", "cmdline:train.py --api-key Zq8-SECRET-01"]

[rules.temperature_high]
warning_c = 73

[alerts]
min_interval = "5m"

[[alerts.webhook]]
url = "https://ops:Zq8-SECRET-02@alerts.example:8443/hooks/Zq8-SECRET-03?api_key=Zq8-SECRET-04#Zq8-SECRET-05"
headers = { Authorization = "Bearer Zq8-SECRET-06", X-Team = "Zq8-SECRET-07" }

[alerts.syslog]
facility = "local3"

[[alerts.exec]]
argv = ["/usr/local/bin/page-oncall", "--routing-key", "Zq8-SECRET-08", "Zq8-SECRET-09"]

[notify]
smtp_password = "Zq8-SECRET-10"
)toml";
constexpr std::string_view kKernelLog =
    "[  12.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n"
    "[  13.000000] fetch https://ops:Zq8-SECRET-11@mirror.example/driver.run?token=Zq8-SECRET-12 done\n";
constexpr std::string_view kSecretMark = "Zq8-SECRET";

// The setup a vendor still needs to read.
constexpr const char* kVisibleSetup[] = {"alerts.example:8443", "Authorization", "X-Team", "/usr/local/bin/page-oncall",
                                         "local3", "smtp_password", "warning_c = 73", "nvidia-persistenced"};

class ReportPrivacyEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "gpudoctor-report-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    std::ofstream(dir_ / "gpudoctor.toml") << kConfig;
    std::ofstream(dir_ / "kern.log") << kKernelLog;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes bundle `name` under `umask`; returns the exit status.
  int Report(const std::string& name, const std::string& umask, const std::string& options = "") {
    const std::string command = "umask " + umask + " && " + testing::Binary() + " report --no-host --simulate " +
                                testing::Example("healthy-8xh100.toml") + " --config " + Path("gpudoctor.toml") +
                                " --logs " + Path("kern.log") + " --output " + Path(name) + " " + options +
                                " >/dev/null 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Every file of the bundle, by name, as the vendor would unpack it.
  std::map<std::string, std::string> Unpack(const std::string& name) {
    const fs::path into = dir_ / (name + ".unpacked");
    fs::create_directories(into);
    EXPECT_EQ(std::system(("tar xzf " + Path(name) + " -C " + into.string()).c_str()), 0);
    std::map<std::string, std::string> files;
    for (const auto& entry : fs::recursive_directory_iterator(into)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      files[entry.path().filename().string()] = text.str();
    }
    return files;
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

TEST_F(ReportPrivacyEndToEnd, NoSecretReachesTheBundleWithOrWithoutRedact) {
  for (const std::string options : {"", "--redact"}) {
    SCOPED_TRACE("report " + options);
    const std::string bundle = options.empty() ? "plain.tar.gz" : "redacted.tar.gz";
    ASSERT_EQ(Report(bundle, "022", options), 0);
    std::map<std::string, std::string> files = Unpack(bundle);
    ASSERT_TRUE(files.contains("config.toml") && files.contains("kernel-log.txt")) << files.size() << " files";
    for (const auto& [name, text] : files) EXPECT_THAT(text, Not(HasSubstr(kSecretMark))) << name;
    for (const char* visible : kVisibleSetup) EXPECT_THAT(files["config.toml"], HasSubstr(visible));
    EXPECT_THAT(files["kernel-log.txt"], HasSubstr("https://<redacted>@mirror.example/driver.run?<redacted> done"));
    EXPECT_THAT(files["kernel-log.txt"], HasSubstr("NVIDIA UNIX x86_64 Kernel Module  550.54.15"));
  }
}

TEST_F(ReportPrivacyEndToEnd, TheBundleIsOwnerOnlyLessTheUmask) {
  for (const auto& [umask, mode] : {std::pair{"022", 0600u}, std::pair{"077", 0600u}, std::pair{"0277", 0400u}}) {
    SCOPED_TRACE(std::string("umask ") + umask);
    const std::string bundle = std::string("umask-") + umask + ".tar.gz";
    ASSERT_EQ(Report(bundle, umask), 0);
    struct stat info {};
    ASSERT_EQ(stat(Path(bundle).c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, mode);
    std::FILE* pipe = popen(("tar tvzf " + Path(bundle)).c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char line[512];
    int members = 0;
    while (std::fgets(line, sizeof line, pipe) != nullptr) {
      EXPECT_THAT(line, ::testing::StartsWith("-rw------- ")) << "a member's mode";
      ++members;
    }
    pclose(pipe);
    EXPECT_GE(members, 6);
  }
}

}  // namespace
}  // namespace gpudoctor
