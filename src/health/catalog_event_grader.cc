#include "health/catalog_event_grader.h"

namespace gpudoctor {

std::optional<EventGrade> CatalogEventGrader::GradeXid(uint32_t code) const {
  const XidInfo* xid = catalog_.FindXid(code);
  if (xid == nullptr) return std::nullopt;
  EventGrade grade;
  grade.severity = SeverityForEvent(xid->severity);
  grade.title = xid->name;
  grade.cause_tags = xid->causes;
  grade.action = xid->action;
  return grade;
}

std::optional<EventGrade> CatalogEventGrader::GradeKind(std::string_view kind) const {
  const KindInfo* info = catalog_.FindKind(kind);
  if (info == nullptr) return std::nullopt;
  EventGrade grade;
  grade.severity = SeverityForEvent(info->severity);
  grade.title = info->title;
  grade.cause_tags = info->causes;
  grade.cause = info->cause;
  grade.action = info->action;
  return grade;
}

}  // namespace gpudoctor
