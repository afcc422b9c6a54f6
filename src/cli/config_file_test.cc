#include "cli/config_file.h"

#include <gtest/gtest.h>

#include "common/scratch_dir.h"

namespace gpudoctor {
namespace {

TEST(ChooseConfig, TheOptionThenTheVariableThenTheDefaultWhenItExists) {
  testing::ScratchDir dir;
  const std::string present = dir.Write("config.toml", "");
  const std::string absent = dir.File("absent.toml");
  EXPECT_EQ(ChooseConfig("site.toml", "env.toml", present).path, "site.toml");
  EXPECT_EQ(ChooseConfig("site.toml", "env.toml", present).label, "--config");
  EXPECT_EQ(ChooseConfig("", "env.toml", present).path, "env.toml");
  EXPECT_EQ(ChooseConfig("", "env.toml", present).label, "GPUDOCTOR_CONFIG");
  EXPECT_EQ(ChooseConfig("", "", present).path, present) << "an empty variable is unset";
  EXPECT_EQ(ChooseConfig("", nullptr, present).how, "the default location");
  EXPECT_EQ(ChooseConfig("", nullptr, absent).path, "") << "a missing default file is no error: every default";
}

TEST(ConfigSettings, EachValueWithItsLineAndDefaultSecretsMasked) {
  auto settings = ConfigSettings(R"(# site
[rules.temperature_high]
warning_c = 70

[[alerts.webhook]]
url = "https://hooks.example.com/services/T0/B0/SECRETPATH"
headers = { Authorization = "Bearer abc123" }
)",
                                 "site.toml");
  ASSERT_TRUE(settings.ok()) << settings.error().message;
  ASSERT_EQ(settings->size(), 3u);
  const ConfigSetting& warning = (*settings)[0];
  EXPECT_EQ(warning.key, "rules.temperature_high.warning_c");
  EXPECT_EQ(warning.value, "70");
  EXPECT_EQ(warning.line, 3);
  EXPECT_EQ(warning.default_value, "75");
  const ConfigSetting& url = (*settings)[1];
  EXPECT_EQ(url.key, "alerts.webhook[0].url");
  EXPECT_EQ(url.line, 6);
  EXPECT_EQ(url.value.find("SECRETPATH"), std::string::npos) << url.value;
  EXPECT_NE(url.value.find("hooks.example.com"), std::string::npos) << "the host stays readable: " << url.value;
  EXPECT_EQ((*settings)[2].value.find("abc123"), std::string::npos) << (*settings)[2].value;
  EXPECT_FALSE((*settings)[2].default_value.has_value());
}

TEST(ConfigSettings, TextThatDoesNotParseNamesItsLine) {
  auto settings = ConfigSettings("[rules]\nx = [\n", "bad.toml");
  ASSERT_FALSE(settings.ok());
  EXPECT_EQ(settings.error().message.rfind("bad.toml:", 0), 0u) << settings.error().message;
}

TEST(LoadFullConfig, EveryPartJudgesTheFile) {
  testing::ScratchDir dir;
  EXPECT_TRUE(LoadFullConfig("").ok()) << "no file: every default";
  EXPECT_TRUE(LoadFullConfig(dir.Write("empty.toml", "")).ok());
  auto wrong_rule = LoadFullConfig(dir.Write("rule.toml", "[rules.no_such_rule]\nwarning = 1\n"));
  ASSERT_FALSE(wrong_rule.ok());
  EXPECT_NE(wrong_rule.error().message.find("unknown rule id"), std::string::npos) << wrong_rule.error().message;
  auto wrong_detector = LoadFullConfig(dir.Write("detector.toml", "[detectors.memory_leak]\nno_such_key = 1\n"));
  ASSERT_FALSE(wrong_detector.ok());
  EXPECT_NE(wrong_detector.error().message.find("unknown key"), std::string::npos) << wrong_detector.error().message;
}

}  // namespace
}  // namespace gpudoctor
