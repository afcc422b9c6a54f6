#include "logs/catalog.h"

#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "common/text.h"
#include "logs/line_matcher.h"

namespace gpudoctor {
namespace {

constexpr const char* kOnlyTheXidKind = R"(
[kinds.xid]
title = "Xid"
cause = "c"
action = "a"
)";

TEST(Catalog, BuiltinCoversEveryXidOfTheReferenceTable) {
  const LogCatalog& catalog = LogCatalog::Builtin();
  std::ifstream table(std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/xid_catalog.tsv");
  std::string line;
  std::getline(table, line);  // header
  int rows = 0;
  while (std::getline(table, line)) {
    auto code = ParseInt<uint32_t>(Split(line, '\t')[0]);
    ASSERT_TRUE(code) << line;
    const XidInfo* xid = catalog.FindXid(*code);
    ASSERT_NE(xid, nullptr) << "Xid " << *code << " missing from data/events.toml";
    EXPECT_FALSE(xid->name.empty());
    EXPECT_FALSE(xid->action.empty());
    ++rows;
  }
  EXPECT_GE(rows, 172);
}

TEST(Catalog, EveryXidOfNvidiasCatalogAndTheDriverIsExplained) {
  for (uint32_t code = 1; code <= 176; ++code) EXPECT_NE(LogCatalog::Builtin().FindXid(code), nullptr) << code;
}

TEST(Catalog, SxidsOfTheFabricManagerGuide) {
  const LogCatalog& catalog = LogCatalog::Builtin();
  const SxidInfo* ltssm = catalog.FindSxid(20034);
  ASSERT_NE(ltssm, nullptr);
  EXPECT_EQ(ltssm->severity, EventSeverity::kCritical);
  EXPECT_EQ(catalog.FindSxid(11012)->severity, EventSeverity::kWarning);  // a corrected single-bit ECC error
  EXPECT_EQ(catalog.FindSxid(99999), nullptr);
  LogEvent event;
  event.kind = "nvswitch_sxid";
  event.fields.push_back({"sxid", "20034"});
  EXPECT_EQ(catalog.TitleOf(event).substr(0, 12), "SXid 20034: ");
  event.fields[0].value = "31337";
  EXPECT_EQ(catalog.TitleOf(event), "SXid 31337: unknown SXid");
}

TEST(Catalog, DecodeTablesOfXids74_144To150_154) {
  const XidDecodeTables& tables = LogCatalog::Builtin().decode();
  ASSERT_FALSE(tables.nvlink5.empty());
  for (const NvLink5Row& row : tables.nvlink5) {
    EXPECT_TRUE(row.xid >= 144 && row.xid <= 150) << row.xid;
    EXPECT_TRUE(tables.nvlink5_actions.count(row.immediate)) << row.immediate;
    EXPECT_TRUE(tables.nvlink5_actions.count(row.investigatory)) << row.investigatory;
  }
  EXPECT_EQ(tables.recovery_actions.front().action, "none");
  EXPECT_FALSE(tables.xid74_bits.empty());
}

TEST(Catalog, ADecodeRowNamingAnUnknownActionIsRejected) {
  std::string text = "nvlink5 = [ { xid = 149, unit = \"NETIR\", status = 0, now = \"NOPE\", then = \"NOPE\" } ]\n" +
                     std::string(kOnlyTheXidKind);
  auto catalog = LogCatalog::FromToml(text, "decode.toml");
  ASSERT_FALSE(catalog);
  EXPECT_NE(catalog.error().message.find("no nvlink5_actions entry for NOPE"), std::string::npos);
}

TEST(Catalog, KeyEntries) {
  const LogCatalog& catalog = LogCatalog::Builtin();
  const XidInfo* off_bus = catalog.FindXid(79);
  ASSERT_NE(off_bus, nullptr);
  EXPECT_EQ(off_bus->severity, EventSeverity::kCritical);
  EXPECT_EQ(off_bus->also_kinds, std::vector<std::string>{"gpu_off_bus"});
  EXPECT_EQ(catalog.FindXid(119)->also_kinds, std::vector<std::string>{"gsp_timeout"});
  EXPECT_EQ(catalog.FindXid(95)->severity, EventSeverity::kCritical);
  EXPECT_EQ(catalog.FindXid(100000), nullptr);
  EXPECT_EQ(catalog.TitleOf("xid", 48).substr(0, 8), "Xid 48: ");
}

TEST(Catalog, HasEveryDocumentedKind) {
  for (const char* kind : {"xid", "gpu_off_bus", "rm_init_failed", "driver_mismatch", "gsp_timeout", "gsp_init_failed",
                           "reset_required", "driver_probe_failed", "pcie_aer", "pcie_bandwidth_limited",
                           "pcie_link_down", "hung_task", "soft_lockup", "oom_kill", "mce", "cpu_thermal",
                           "nvswitch_sxid", "fabric_manager", "display_timeout", "rcu_stall", "gsp_error",
                           "driver_loaded", "gpu_crash_dump", "kernel_oops", "kernel_panic", "persistenced_failed"}) {
    const KindInfo* info = LogCatalog::Builtin().FindKind(kind);
    ASSERT_NE(info, nullptr) << kind;
    EXPECT_FALSE(info->action.empty()) << kind;
  }
}

TEST(Catalog, BuiltinPatternsCompile) {
  auto matcher = LineMatcher::Create(LogCatalog::Builtin());
  ASSERT_TRUE(matcher) << matcher.error().message;
}

constexpr const char* kMinimal = R"(
xids = [
  { code = 79, name = "fell off", severity = "critical", causes = ["PCIe"], action = "reseat" },
]
[kinds.xid]
title = "Xid"
cause = "c"
action = "a"
[[patterns]]
id = "xid"
kind = "xid"
literals = ["Xid"]
regex = 'Xid \({PCI}\): (?P<xid>\d+)'
)";

TEST(Catalog, OverrideFileLoadsAndAddingAnXidIsOneLine) {
  auto catalog = LogCatalog::FromToml(kMinimal, "override.toml");
  ASSERT_TRUE(catalog) << catalog.error().message;
  EXPECT_EQ(catalog->xids().size(), 1u);
  std::string with_new = kMinimal;
  with_new.insert(with_new.find("]\n[kinds"),
                  "  { code = 200, name = \"new\", severity = \"warning\", causes = [], action = \"x\" },\n");
  auto extended = LogCatalog::FromToml(with_new, "override.toml");
  ASSERT_TRUE(extended) << extended.error().message;
  EXPECT_NE(extended->FindXid(200), nullptr);
}

// An Xid's steps are its one advice text: `action` is them as a paragraph,
// and a kind that reports the same fault takes them with `advice = "xid N"`.
TEST(Catalog, StepsAreTheOneAdviceAKindCanShare) {
  std::string text = kMinimal;
  text.replace(text.find("action = \"reseat\""), 17, "steps = [\"Power-cycle it.\", \"Reseat it.\"]");
  text += "[kinds.gpu_off_bus]\ntitle = \"off\"\ncause = \"c\"\nadvice = \"xid 79\"\n";
  auto catalog = LogCatalog::FromToml(text, "steps.toml");
  ASSERT_TRUE(catalog) << catalog.error().message;
  EXPECT_EQ(catalog->FindXid(79)->steps, (std::vector<std::string>{"Power-cycle it.", "Reseat it."}));
  EXPECT_EQ(catalog->FindXid(79)->action, "Power-cycle it. Reseat it.");
  EXPECT_EQ(catalog->FindKind("gpu_off_bus")->action, "Power-cycle it. Reseat it.");

  std::string both = text;
  both.replace(both.find("steps = "), 0, "action = \"x\", ");
  auto refused = LogCatalog::FromToml(both, "both.toml");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("xid 79 gives both steps and action"), std::string::npos)
      << refused.error().message;
  std::string unknown = text;
  unknown.replace(unknown.find("\"xid 79\""), 8, "\"xid 9999\"");
  refused = LogCatalog::FromToml(unknown, "unknown.toml");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("kinds.gpu_off_bus.advice must name a listed Xid"), std::string::npos)
      << refused.error().message;
}

TEST(Catalog, TheBuiltinXid79AndItsKindGiveOneAdvice) {
  const LogCatalog& catalog = LogCatalog::Builtin();
  ASSERT_NE(catalog.FindXid(79), nullptr);
  EXPECT_FALSE(catalog.FindXid(79)->steps.empty());
  EXPECT_EQ(catalog.FindKind("gpu_off_bus")->action, catalog.FindXid(79)->action);
}

TEST(Catalog, BadDataIsRejectedWithTheReason) {
  auto expect_error = [](std::string text, const std::string& needle) {
    auto catalog = LogCatalog::FromToml(text, "bad.toml");
    ASSERT_FALSE(catalog) << needle;
    EXPECT_NE(catalog.error().message.find(needle), std::string::npos) << catalog.error().message;
  };
  std::string base = kMinimal;
  expect_error("xids = [", "bad.toml");
  std::string bad_severity = base;
  bad_severity.replace(bad_severity.find("\"critical\""), 10, "\"fatal\"");
  expect_error(bad_severity, "info, warning or critical");
  std::string bad_tag = base;
  bad_tag.replace(bad_tag.find("[\"PCIe\"]"), 8, "[\"cosmic\"]");
  expect_error(bad_tag, "unknown cause tag");
  std::string bad_kind = base;
  bad_kind.replace(bad_kind.find("kind = \"xid\""), 12, "kind = \"nope\"");
  expect_error(bad_kind, "unknown kind");
  expect_error(base + base.substr(base.find("[[patterns]]")), "defined twice");
  std::string reach_with_literals = base;
  reach_with_literals.insert(reach_with_literals.find("regex = 'Xid"), "reach = 2\n");
  expect_error(reach_with_literals, "reach is for continue patterns without literals");
  // The reader scans whole blocks for the literals: one with a line break would match across two lines.
  for (std::string_view escaped : {"\\n", "\\r", "\\u0000"}) {
    std::string line_break = base;
    line_break.replace(line_break.find("literals = [\"Xid\"]"), 18,
                       "literals = [\"Xid" + std::string(escaped) + "\"]");
    expect_error(line_break, "a literal with a line break or a NUL byte");
  }

  std::string bad_regex = base;
  bad_regex.replace(bad_regex.find("(?P<xid>\\d+)"), 12, "(?P<xid>\\d+");
  auto catalog = LogCatalog::FromToml(bad_regex, "bad.toml");
  ASSERT_TRUE(catalog);
  auto matcher = LineMatcher::Create(*catalog);
  ASSERT_FALSE(matcher);
  EXPECT_NE(matcher.error().message.find("pattern xid"), std::string::npos);
  EXPECT_NE(matcher.error().message.find("bad regex: missing )"), std::string::npos) << matcher.error().message;
}

}  // namespace
}  // namespace gpudoctor
