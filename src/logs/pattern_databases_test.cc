#include "logs/pattern_databases.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <sstream>

#include <gtest/gtest.h>

#include "logs/line_matcher.h"

namespace gpudoctor {

extern const char kBuiltinCatalogToml[];  // generated from data/events.toml

namespace {

// Every line of the real log excerpts, plus lines with the dmesg -H minute stamp.
std::string CorpusText() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/kernel_logs")) {
    if (entry.path().extension() == ".log") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::ostringstream text;
  for (const auto& file : files) text << std::ifstream(file, std::ios::binary).rdbuf() << "\n";
  text << "[Feb23 16:24] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n"
          "[  +0.000316] nvidia 0000:01:00.0: GPU at PCI:0000:01:00: GPU-8f6a6d2e-0c1f-4b7e-9a51-3d9f0e2c1b11\n";
  return text.str();
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::vector<std::pair<size_t, size_t>> BlockLines(const LineMatcher& matcher, std::string_view text,
                                                  bool minute_stamps) {
  LineMatcher::Scratch scratch(matcher);
  std::vector<std::pair<size_t, size_t>> lines;
  matcher.ScanBlock(text, minute_stamps, scratch,
                    [&](size_t begin, size_t end, std::span<const uint32_t>) { lines.emplace_back(begin, end); });
  return lines;
}

std::string SerializedFor(uint64_t cpu_features) {
  auto compiled = PatternDatabases::Compile(LogCatalog::Builtin(), cpu_features);
  EXPECT_TRUE(compiled.ok());
  auto bytes = compiled->Serialize();
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

std::shared_ptr<const LineMatcher> FromBytes(const std::string& bytes) {
  auto matcher = LineMatcher::Create(LogCatalog::Builtin(), {bytes});
  EXPECT_TRUE(matcher.ok());
  return *matcher;
}

TEST(PatternDatabasesTest, BuiltinMatcherLoadsTheDatabasesCompiledAtBuildTime) {
  const auto& sets = PrebuiltCpuFeatureSets();
  if (std::find(sets.begin(), sets.end(), HostCpuFeatures()) == sets.end()) {
    GTEST_SKIP() << "no database was compiled at build time for this CPU's features";
  }
  EXPECT_TRUE(LineMatcher::Builtin()->prebuilt());
}

TEST(PatternDatabasesTest, PrebuiltDatabasesFindWhatRunTimeCompiledOnesFind) {
  auto compiled = LineMatcher::Create(LogCatalog::Builtin());
  ASSERT_TRUE(compiled.ok());
  ASSERT_FALSE((*compiled)->prebuilt());
  auto loaded = FromBytes(SerializedFor(HostCpuFeatures()));
  ASSERT_TRUE(loaded->prebuilt());

  const std::string text = CorpusText();
  for (bool minute_stamps : {false, true}) {
    auto expected = BlockLines(**compiled, text, minute_stamps);
    EXPECT_GT(expected.size(), 100u);
    EXPECT_EQ(BlockLines(*loaded, text, minute_stamps), expected);
  }
  LineMatcher::Scratch compiled_scratch(**compiled);
  LineMatcher::Scratch loaded_scratch(*loaded);
  std::vector<uint32_t> expected, got;
  size_t lines_with_candidates = 0;
  for (std::string_view line : Lines(text)) {
    (*compiled)->Candidates(line, compiled_scratch, expected);
    loaded->Candidates(line, loaded_scratch, got);
    EXPECT_EQ(got, expected) << line;
    lines_with_candidates += !expected.empty();
  }
  EXPECT_GT(lines_with_candidates, 100u);
}

// The reader hands the parser each line's candidates from its block scan instead of scanning the line
// again (LogParser::Feed): they must be what Candidates finds in the line alone, and a line the block
// scan does not report must have none.
TEST(PatternDatabasesTest, TheBlockScanGivesEachLineTheCandidatesItsOwnScanFinds) {
  auto matcher = LineMatcher::Builtin();
  LineMatcher::Scratch scratch(*matcher);
  // Several patterns' literals in one line, the same literal twice, a driver module's tag alone,
  // and a last line without its newline.
  const std::string text = CorpusText() +
                           "NVRM: Xid (PCI:0000:3b:00): 48, pid=1234, name=python, An uncorrectable double bit "
                           "error (DBE) has been detected on GPU in the framebuffer at partition 6. Xid Xid\n"
                           "nvidia-uvm: a line about the module\n"
                           "INFO: task python:4242 blocked for more than 120 seconds. NVRM: GPU at PCI:";
  for (bool minute_stamps : {false, true}) {
    std::map<size_t, std::pair<size_t, std::vector<uint32_t>>> reported;
    matcher->ScanBlock(text, minute_stamps, scratch, [&](size_t begin, size_t end, std::span<const uint32_t> ids) {
      reported[begin] = {end, std::vector<uint32_t>(ids.begin(), ids.end())};
    });
    std::vector<uint32_t> expected;
    size_t begin = 0, with_candidates = 0, several = 0;
    for (std::string_view line : Lines(text)) {
      matcher->Candidates(line, scratch, expected);
      auto found = reported.find(begin);
      if (found == reported.end()) {
        EXPECT_TRUE(expected.empty()) << "a line the block scan skipped has candidates: " << line;
      } else {
        EXPECT_EQ(found->second.first, begin + line.size()) << line;
        EXPECT_EQ(found->second.second, expected) << line;
        with_candidates += !expected.empty();
        several += expected.size() > 1;
      }
      begin += line.size() + 1;
    }
    EXPECT_GT(with_candidates, 100u);
    EXPECT_GT(several, 0u);
  }
}

TEST(PatternDatabasesTest, DatabasesForOtherCpuFeaturesAreRefusedAndCompiledInstead) {
  const uint64_t other = HostCpuFeatures() == 0 ? PrebuiltCpuFeatureSets()[1] : 0;
  const std::string bytes = SerializedFor(other);
  auto refused = PatternDatabases::Deserialize(bytes, LogCatalog::Builtin(), HostCpuFeatures());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("other CPU features"), std::string::npos);
  auto matcher = FromBytes(bytes);
  EXPECT_FALSE(matcher->prebuilt());
  EXPECT_EQ(BlockLines(*matcher, CorpusText(), false),
            BlockLines(*FromBytes(SerializedFor(HostCpuFeatures())), CorpusText(), false));
}

TEST(PatternDatabasesTest, DamagedOrForeignBytesAreRefusedAndCompiledInstead) {
  const std::string good = SerializedFor(HostCpuFeatures());
  std::string flipped = good;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x5a);
  std::string other_version = good;
  // The first database's Vectorscan header follows our 24-byte header and its
  // length: magic, then the version word.
  other_version[24 + 8 + 4] = static_cast<char>(other_version[24 + 8 + 4] ^ 0x01);
  // The built-in catalog with one more pattern: its databases differ.
  auto other_catalog = LogCatalog::FromToml(std::string(kBuiltinCatalogToml) +
                                                "\n[[patterns]]\nid = \"one_more\"\nkind = \"xid\"\n"
                                                "literals = [\"one more literal\"]\nregex = 'one more literal'\n",
                                            "one more pattern");
  ASSERT_TRUE(other_catalog.ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"not ours", "GDPATDB0 and then some bytes of no database at all"},
      {"truncated", good.substr(0, good.size() - 100)},
      {"trailing bytes", good + "x"},
      {"a flipped byte", flipped},
      {"another Vectorscan version", other_version},
  };
  for (const auto& [what, bytes] : cases) {
    EXPECT_FALSE(PatternDatabases::Deserialize(bytes, LogCatalog::Builtin(), HostCpuFeatures()).ok()) << what;
    EXPECT_FALSE(FromBytes(bytes)->prebuilt()) << what;
  }
  auto foreign = PatternDatabases::Deserialize(good, *other_catalog, HostCpuFeatures());
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().message.find("another catalog"), std::string::npos);
}

TEST(PatternDatabasesTest, TheFirstFittingDatabaseIsLoaded) {
  const uint64_t other = HostCpuFeatures() == 0 ? PrebuiltCpuFeatureSets()[1] : 0;
  auto matcher = LineMatcher::Create(LogCatalog::Builtin(), {"junk", SerializedFor(other), SerializedFor(HostCpuFeatures())});
  ASSERT_TRUE(matcher.ok());
  EXPECT_TRUE((*matcher)->prebuilt());
}

}  // namespace
}  // namespace gpudoctor
