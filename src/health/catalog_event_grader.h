// CatalogEventGrader: grades log events with the log engine's catalog
// (data/events.toml): each Xid's severity, name, cause tags and action, and
// each event kind's title, cause and action.
//
//   CatalogEventGrader grader(LogCatalog::Builtin());
//   HealthInput input;
//   input.event_grader = &grader;
#pragma once

#include "health/event_grader.h"
#include "logs/catalog.h"

namespace gpudoctor {

class CatalogEventGrader final : public EventGrader {
 public:
  // `catalog` must outlive the grader.
  explicit CatalogEventGrader(const LogCatalog& catalog) : catalog_(catalog) {}

  std::optional<EventGrade> GradeXid(uint32_t code) const override;
  std::optional<EventGrade> GradeKind(std::string_view kind) const override;

 private:
  const LogCatalog& catalog_;
};

}  // namespace gpudoctor
