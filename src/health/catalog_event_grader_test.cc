#include "health/catalog_event_grader.h"

#include <gtest/gtest.h>

#include "health/health_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing_support;

TEST(CatalogEventGrader, GradesXidsAndKindsFromTheBuiltinCatalog) {
  CatalogEventGrader grader(LogCatalog::Builtin());
  std::optional<EventGrade> off_bus = grader.GradeXid(79);
  ASSERT_TRUE(off_bus.has_value());
  EXPECT_EQ(off_bus->severity, Severity::kCritical);
  EXPECT_NE(off_bus->title.find("fallen off the bus"), std::string::npos);
  EXPECT_FALSE(off_bus->action.empty());
  EXPECT_FALSE(off_bus->cause_tags.empty());

  std::optional<EventGrade> aer = grader.GradeKind("pcie_aer");
  ASSERT_TRUE(aer.has_value());
  EXPECT_FALSE(aer->title.empty());
  EXPECT_FALSE(aer->cause.empty());

  EXPECT_FALSE(grader.GradeXid(999999).has_value());
  EXPECT_FALSE(grader.GradeKind("no_such_kind").has_value());
}

TEST(CatalogEventGrader, XidFindingCarriesTheCatalogsAction) {
  CatalogEventGrader grader(LogCatalog::Builtin());
  Snapshot snapshot = HealthySnapshot();
  std::vector<LogEvent> events{XidLogEvent(79, "0000:1b:00.0", EventSeverity::kWarning, kNow)};
  HealthInput input;
  input.snapshot = &snapshot;
  input.log_events = &events;
  input.event_grader = &grader;
  input.now = kNow;
  std::vector<Finding> findings = WithId(EvaluateRules(input, DefaultHealthConfig()), "xid_recent");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kCritical);
  EXPECT_EQ(findings[0].actions.front(), LogCatalog::Builtin().FindXid(79)->action);
  EXPECT_NE(findings[0].summary.find("Xid 79 on GPU 0: GPU has fallen off the bus"), std::string::npos);
}

}  // namespace
}  // namespace gpudoctor
