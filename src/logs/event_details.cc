#include "logs/event_details.h"

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "common/text.h"

namespace gpudoctor {
namespace {

// Adds a detail field unless the event already has one of that name.
void AddDetail(LogEvent& event, std::string name, std::string value) {
  if (value.empty() || !event.Field(name).empty()) return;
  event.fields.push_back(EventField{std::move(name), std::move(value)});
}

// "0x021425c6" -> 0x021425c6.
std::optional<uint32_t> ParseHexWord(std::string_view text) {
  if (StartsWith(text, "0x") || StartsWith(text, "0X")) text.remove_prefix(2);
  return ParseInt<uint32_t>(text, 16);
}

// Joins the distinct non-empty texts with `separator`, in order.
std::string JoinDistinct(const std::vector<std::string>& texts, std::string_view separator) {
  std::vector<std::string> seen;
  std::string out;
  for (const std::string& text : texts) {
    if (text.empty() || std::find(seen.begin(), seen.end(), text) != seen.end()) continue;
    seen.push_back(text);
    if (!out.empty()) out += separator;
    out += text;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Xid 144-150: "<unit> Fatal|Nonfatal XC<n> i<n> Link <n> (<intrinfo> <error status> ...)".
// Drivers before R575 print "XC 1 i 2" and one word in brackets.

const RE2& NvLink5Line() {
  static const RE2 regex(
      R"(([A-Z][A-Z0-9_]*(?:/[A-Z][A-Z0-9_]*)*)\s+(Fatal|Nonfatal|Non-fatal)\s+XC\s?\d+\s+i\s?\d+\s+Link\s+(-?\d+))"
      R"((?:\s*[(\[](0x[0-9a-fA-F]+)(?:[\s,]+(0x[0-9a-fA-F]+))?)?)");
  return regex;
}

bool SharesAName(const std::vector<std::string>& names, std::string_view printed) {
  for (std::string_view part : Split(printed, '/')) {
    if (std::find(names.begin(), names.end(), part) != names.end()) return true;
  }
  return false;
}

// What to do for one of NVIDIA's resolution buckets (the catalog has one for each).
std::string NvLink5ActionText(const XidDecodeTables& tables, const std::string& bucket) {
  auto it = tables.nvlink5_actions.find(bucket);
  return it == tables.nvlink5_actions.end() ? bucket : it->second;
}

const NvLink5Row* FindNvLink5Row(const XidDecodeTables& tables, uint32_t xid, std::string_view unit,
                                 uint32_t error_status, uint32_t subcode) {
  for (const NvLink5Row& row : tables.nvlink5) {
    if (row.xid == xid && row.error_status == error_status && (!row.subcode || *row.subcode == subcode) &&
        SharesAName(row.units, unit)) {
      return &row;
    }
  }
  return nullptr;
}

void DecodeNvLink5(const XidDecodeTables& tables, LogEvent& event) {
  std::string unit, word, link, intrinfo_text, status_text;
  if (!RE2::PartialMatch(event.message, NvLink5Line(), &unit, &word, &link, &intrinfo_text, &status_text)) return;
  AddDetail(event, "nvlink_unit", unit);
  AddDetail(event, "link", link);
  // The driver itself says whether the error is fatal to the link.
  event.severity = word == "Fatal" ? EventSeverity::kCritical : EventSeverity::kWarning;
  std::optional<uint32_t> intrinfo = ParseHexWord(intrinfo_text);
  if (!intrinfo) return;
  const uint32_t error_status = ParseHexWord(status_text).value_or(0);
  const uint32_t subcode = (*intrinfo >> 20) & 0x3f;
  AddDetail(event, "intrinfo", intrinfo_text);
  AddDetail(event, "error_status", status_text.empty() ? "" : status_text);
  AddDetail(event, "subcode", std::to_string(subcode));
  const NvLink5Row* row = FindNvLink5Row(tables, *event.xid, unit, error_status, subcode);
  if (row == nullptr) return;
  AddDetail(event, "resolution", row->immediate + ", then " + row->investigatory);
  AddDetail(event, "action",
            JoinDistinct({NvLink5ActionText(tables, row->immediate), NvLink5ActionText(tables, row->investigatory)}, " "));
}

// ---------------------------------------------------------------------------
// Xid 74: "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)".

const RE2& Xid74Line() {
  static const RE2 regex(R"([Ll]ink\s*(\d+)\s*\(\s*(0x[0-9a-fA-F]+(?:\s*,\s*0x[0-9a-fA-F]+)*)\s*\))");
  return regex;
}

const RE2& Xid74LinkOnly() {
  static const RE2 regex(R"(error detected on link\s*(\d+))");
  return regex;
}

// The registers the decode table covers; NVIDIA asks for a bug report for any
// other bit set in them.
constexpr std::array<uint32_t, 4> kAnalysedXid74Registers = {0, 2, 3, 4};

void DecodeXid74(const XidDecodeTables& tables, LogEvent& event) {
  std::string link, register_list;
  if (!RE2::PartialMatch(event.message, Xid74Line(), &link, &register_list)) {
    if (RE2::PartialMatch(event.message, Xid74LinkOnly(), &link)) AddDetail(event, "link", link);
    return;
  }
  AddDetail(event, "link", link);
  AddDetail(event, "registers", register_list);
  std::vector<uint32_t> registers;
  for (std::string_view word : Split(register_list, ',')) registers.push_back(ParseHexWord(Trim(word)).value_or(0));

  std::vector<std::string> meanings, steps;
  EventSeverity severity = EventSeverity::kInfo;
  bool any_bit = false;
  for (uint32_t index : kAnalysedXid74Registers) {
    if (index >= registers.size() || registers[index] == 0) continue;
    any_bit = true;
    uint32_t unexplained = registers[index];
    for (const Xid74Bits& row : tables.xid74_bits) {
      if (row.register_index != index) continue;
      for (uint32_t bit : row.bits) {
        if ((registers[index] >> bit & 1) == 0) continue;
        unexplained &= ~(1u << bit);
        meanings.push_back("register " + std::to_string(index) + " bit " + std::to_string(bit) + ": " + row.meaning);
        steps.push_back(row.step);
        severity = std::max(severity, row.severity);
      }
    }
    if (unexplained != 0) {
      meanings.push_back("register " + std::to_string(index) + " has unexpected bits set");
      steps.push_back("Report the unexpected bits to NVIDIA with an nvidia-bug-report.sh log.");
      severity = EventSeverity::kCritical;
    }
  }
  if (!any_bit) return;
  AddDetail(event, "meaning", JoinDistinct(meanings, "; "));
  AddDetail(event, "action", JoinDistinct(steps, " "));
  // The link is down until the GPU is reset, whatever the bits say.
  event.severity = std::max(severity, EventSeverity::kWarning);
}

// ---------------------------------------------------------------------------
// Xid 154: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)".

const RE2& RecoveryActionText() {
  static const RE2 regex(R"((?i)recovery action changed from .* to (0x[0-9a-f]+) \(([^)]*)\))");
  return regex;
}

const RecoveryAction* FindRecoveryAction(const XidDecodeTables& tables, std::string_view wording) {
  const std::string lower = ToLower(wording);
  for (const RecoveryAction& action : tables.recovery_actions) {
    for (const std::string& name : action.names) {
      if (lower.find(name) != std::string::npos) return &action;
    }
  }
  return nullptr;
}

void DecodeRecoveryAction(const XidDecodeTables& tables, LogEvent& event) {
  std::string code, wording;
  if (!RE2::PartialMatch(event.message, RecoveryActionText(), &code, &wording)) return;
  const RecoveryAction* action = FindRecoveryAction(tables, wording);
  if (action == nullptr) return;
  AddDetail(event, "recovery", action->action);
  AddDetail(event, "action", action->step);
  // The reset_required event a reset, reboot or drain also yields stays critical.
  if (event.kind == "xid") event.severity = action->severity;
}

// ---------------------------------------------------------------------------
// SXids: the line says Fatal or Non-fatal; when it does not, the catalog does.

void DecodeSxid(const LogCatalog& catalog, LogEvent& event) {
  if (!event.Field("sxid_severity").empty()) return;
  std::optional<uint32_t> code = ParseInt<uint32_t>(event.Field("sxid"));
  if (!code) return;
  if (const SxidInfo* info = catalog.FindSxid(*code)) event.severity = info->severity;
}

bool IsNvLink5Xid(uint32_t xid) { return xid >= 144 && xid <= 150; }

}  // namespace

void DecodeEventDetails(const LogCatalog& catalog, LogEvent& event) {
  const XidDecodeTables& tables = catalog.decode();
  if (event.kind == "xid" && event.xid) {
    if (IsNvLink5Xid(*event.xid)) {
      DecodeNvLink5(tables, event);
    } else if (*event.xid == 74) {
      DecodeXid74(tables, event);
    } else if (*event.xid == 154) {
      DecodeRecoveryAction(tables, event);
    }
  } else if (event.kind == "reset_required") {
    DecodeRecoveryAction(tables, event);
  } else if (event.kind == "nvswitch_sxid") {
    DecodeSxid(catalog, event);
  }
}

}  // namespace gpudoctor
