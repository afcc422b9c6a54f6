#include "redact/secrets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpudoctor {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// A value no other text contains, so finding it anywhere is a leak.
std::string Secret(int n) { return "Zq8-SECRET-" + std::to_string(n) + "-x7Kp"; }

bool ParsesAsToml(const std::string& text) {
  try {
    return !toml::parse(text).empty() || text.find('=') == std::string::npos;
  } catch (const toml::parse_error&) {
    return false;
  }
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---- The config: kConfigSecrets, walked -----------------------------------------

// The TOML that puts `value` at `path`, under a table header ("[a.b]") or an
// array-of-tables header ("[[a.b]]").
std::string ConfigWith(std::string_view path, const std::string& value, bool array_of_tables) {
  std::string dotted(path);
  for (size_t star; (star = dotted.find('*')) != std::string::npos;) dotted.replace(star, 1, "X-Any-Name");
  const size_t last_dot = dotted.rfind('.');
  const std::string table = dotted.substr(0, last_dot);
  const std::string header = array_of_tables ? "[[" + table + "]]" : "[" + table + "]";
  return header + "\n" + dotted.substr(last_dot + 1) + " = " + value + "\n";
}

TEST(RedactConfigSecrets, MasksEveryPathOfTheTableUnderEitherKindOfHeader) {
  for (const ConfigSecret& rule : kConfigSecrets) {
    for (bool array_of_tables : {false, true}) {
      SCOPED_TRACE(std::string(rule.path) + (array_of_tables ? " as [[...]]" : " as [...]"));
      std::string value;
      std::vector<std::string> kept;
      switch (rule.mask) {
        case SecretMask::kWholeValue:
          value = "\"" + Secret(1) + "\"";
          break;
        case SecretMask::kUrlOrigin:
          value = "\"https://ops:" + Secret(1) + "@alerts.example:8443/hooks/" + Secret(2) + "?api_key=" + Secret(3) +
                  "#" + Secret(4) + "\"";
          kept = {"https://", "alerts.example:8443"};
          break;
        case SecretMask::kArgvTail:
          value = "[\"/usr/local/bin/page-oncall\", \"--token\", \"" + Secret(1) + "\", \"" + Secret(2) + "\"]";
          kept = {"/usr/local/bin/page-oncall"};
          break;
      }
      const std::string redacted = RedactConfigSecrets(ConfigWith(rule.path, value, array_of_tables));
      for (int n = 1; n <= 4; ++n) EXPECT_THAT(redacted, Not(HasSubstr(Secret(n))));
      for (const std::string& part : kept) EXPECT_THAT(redacted, HasSubstr(part));
      EXPECT_THAT(redacted, HasSubstr(std::string(kRedacted)));
      EXPECT_TRUE(ParsesAsToml(redacted)) << redacted;
    }
  }
}

TEST(RedactConfigSecrets, MasksEveryKeyNamedLikeASecretWhereverItStandsAndWhateverItHolds) {
  for (std::string_view part : kSecretNameParts) {
    const std::string name = "my_" + std::string(part);
    std::string upper = "X_" + std::string(part);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::vector<std::pair<std::string, std::string>> configs_and_keys = {
        {name + " = \"" + Secret(1) + "\"\n", name},
        {"[host]\n" + upper + " = \"" + Secret(1) + "\"\n", upper},
        {"[[detectors.job]]\nname = \"train\"\n" + name + " = [\"" + Secret(1) + "\"]\n", name},
        {"[alerts]\nextra = { " + name + " = \"" + Secret(1) + "\" }\n", name},
        {"[" + name + "]\nuser = \"" + Secret(1) + "\"\nnested = { deeper = [\"" + Secret(2) + "\"] }\n", "user"},
        {"[alerts.syslog]\n" + name + " = 7350911\n", name},
    };
    for (const auto& [config, key] : configs_and_keys) {
      SCOPED_TRACE(config);
      const std::string redacted = RedactConfigSecrets(config);
      for (const std::string& secret : {Secret(1), Secret(2), std::string("7350911")})
        EXPECT_THAT(redacted, Not(HasSubstr(secret)));
      EXPECT_THAT(redacted, HasSubstr(key + " = "));
      EXPECT_TRUE(ParsesAsToml(redacted)) << redacted;
    }
  }
}

// The layout docs/agent.md shows, with every sink, a secret in each place one can stand.
constexpr std::string_view kAgentConfig = R"toml(
[host]
processes = ["nvidia-persistenced", "cmdline:train.py --api-key=Zq8-SECRET-1-x7Kp"]

[rules.temperature_high]
warning_c = 83

[detectors.memory_leak]
window = "30m"

[alerts]
min_interval = "5m"
syslog = { facility = "local3" }
exec = [{ argv = ["/usr/local/bin/page-oncall", "--routing-key", "Zq8-SECRET-7-x7Kp"], timeout = "10s" }]

[[alerts.webhook]]
url = "https://ops:Zq8-SECRET-2-x7Kp@alerts.example:8443/gpudoctor?api_key=Zq8-SECRET-3-x7Kp"
headers = { Authorization = "Bearer Zq8-SECRET-4-x7Kp", X-Team = "Zq8-SECRET-5-x7Kp" }
timeout = "5s"

[[alerts.webhook]]
url = "https://hooks.slack.example/services/T000/B000/Zq8-SECRET-6-x7Kp"
)toml";

TEST(RedactConfigSecrets, KeepsWhatIsNotSecretSoTheSetupCanBeRead) {
  const std::string redacted = RedactConfigSecrets(kAgentConfig);
  for (int n = 1; n <= 7; ++n) EXPECT_THAT(redacted, Not(HasSubstr(Secret(n))));
  for (const char* kept : {"nvidia-persistenced", "cmdline:train.py --api-key=", "warning_c = 83", "window = '30m'",
                           "https://<redacted>@alerts.example:8443/<redacted>?<redacted>", "Authorization",
                           "X-Team", "timeout = '5s'", "https://hooks.slack.example/<redacted>", "facility = 'local3'",
                           "'/usr/local/bin/page-oncall'"})
    EXPECT_THAT(redacted, HasSubstr(kept));
  EXPECT_THAT(redacted, StartsWith("# Secrets are <redacted>"));
  EXPECT_TRUE(ParsesAsToml(redacted)) << redacted;
}

TEST(RedactConfigSecrets, MaskingTwiceChangesNothing) {
  const std::string once = RedactConfigSecrets(kAgentConfig);
  EXPECT_EQ(RedactTextSecrets(once), once);
}

TEST(RedactConfigSecrets, TextThatIsNotTomlKeepsOnlyHeadersAndKeyNames) {
  std::string broken(kAgentConfig);
  broken += "# old token: Zq8-SECRET-8-x7Kp\nthis line = is not \"TOML Zq8-SECRET-9-x7Kp\n";
  ASSERT_FALSE(ParsesAsToml(broken));
  const std::string redacted = RedactConfigSecrets(broken);
  for (int n = 1; n <= 9; ++n) EXPECT_THAT(redacted, Not(HasSubstr(Secret(n))));
  const auto bad_line = std::count(broken.begin(), broken.end(), '\n');  // the last one
  EXPECT_THAT(redacted, StartsWith("# Not valid TOML (line " + std::to_string(bad_line) + ")"));
  for (const char* kept : {"\n[[alerts.webhook]]\n", "\nurl = <redacted>\n", "\nheaders = <redacted>\n",
                           "\nsyslog = <redacted>\n", "\nexec = <redacted>\n"})
    EXPECT_THAT(redacted, HasSubstr(kept));
  EXPECT_THAT(redacted, Not(HasSubstr("local3")));
}

TEST(RedactConfigSecrets, AUrlThatIsNotOneIsMaskedWhole) {
  const std::string redacted = RedactConfigSecrets("[[alerts.webhook]]\nurl = \"ops:Zq8-SECRET-1-x7Kp@host\"\n");
  EXPECT_THAT(redacted, Not(HasSubstr("host")));
  EXPECT_THAT(redacted, HasSubstr("url = '<redacted>'"));
}

// ---- Free text -------------------------------------------------------------------

TEST(RedactTextSecrets, MasksCredentialsInLogsAndCommandOutput) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"POST https://ops:hunter2@alerts.example/x failed", "POST https://<redacted>@alerts.example/x failed"},
      {"GET http://h.example:80/p?api_key=abc&x=1#frag done", "GET http://h.example:80/p?<redacted> done"},
      {"Authorization: Bearer abc.def", "Authorization: Bearer <redacted>"},
      {"password=hunter2 user=root", "password=<redacted> user=root"},
      {"db_Password: 's3 cr3t', next", "db_Password: '<redacted>', next"},
      {R"({"api_token": "abc", "gpu": 3})", R"({"api_token": "<redacted>", "gpu": 3})"},
      {"run --token abc123 --team gpu", "run --token <redacted> --team gpu"},
      {"sent bearer eyJhbGciOiJIUzI1NiJ9", "sent bearer <redacted>"},
  };
  for (const auto& [text, expected] : cases) EXPECT_EQ(RedactTextSecrets(text), expected) << text;
}

TEST(RedactTextSecrets, MaskingTwiceChangesNothing) {
  const std::string once = RedactTextSecrets("https://a:b@h/p?q#f Authorization: Bearer x token='y' --key z");
  EXPECT_EQ(RedactTextSecrets(once), once);
}

TEST(RedactTextSecrets, DriverNumbersAndOrdinaryWordsStay) {
  for (const char* text : {"kbusSendSysmembarSingle_GH100: - timeout error waiting for startToken = 0x3 cnt=24105122",
                           "Key type dns_resolver registered", "GPU 3 has fallen off the bus.", "monkey business"})
    EXPECT_EQ(RedactTextSecrets(text), text);
}

// Real kernel logs, nvidia-smi captures and our own data files hold no secret:
// masking must leave every byte as it was. (testdata/nvidia_smi/invalid holds
// made-up text, such as a "Key : Value" table, not captures.)
TEST(RedactTextSecrets, LeavesRealCapturesUnchanged) {
  const std::filesystem::path source(GPUDOCTOR_SOURCE_DIR);
  int files = 0;
  for (const char* folder : {"testdata/kernel_logs", "testdata/nvidia_smi", "testdata/health", "data"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(source / folder)) {
      if (!entry.is_regular_file() || entry.path().extension() == ".gz" ||
          entry.path().parent_path().filename() == "invalid")
        continue;
      const std::string text = ReadFile(entry.path());
      EXPECT_EQ(RedactTextSecrets(text), text) << entry.path();
      ++files;
    }
  }
  EXPECT_GT(files, 40);
}

}  // namespace
}  // namespace gpudoctor
