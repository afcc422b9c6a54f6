// `gpudoctor explain xid N` / `gpudoctor explain sxid N` / `gpudoctor explain KIND|FINDING`:
// what an Xid, an NVSwitch SXid or an event kind means, its likely causes and
// what to do, from the event catalog; for a finding id (a rule, a trend
// detector, a root cause, an escalation), its settings, cause and actions as
// configured. For Xids whose lines carry more (74,
// 144-150, 154) it also prints how gpudoctor decodes them.
//
//   gpudoctor explain xid 79
//   gpudoctor explain sxid 20034
//   gpudoctor explain pcie_aer --json
//   gpudoctor explain xid          every Xid, one per line

#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/sources.h"
#include "cli/terminal.h"
#include "common/suggest.h"
#include "common/text.h"
#include "health/health_config.h"
#include "health/rule_ids.h"
#include "logs/catalog.h"
#include "logs/event_json.h"

namespace gpudoctor {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "not stated" : out;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : "/") + name;
  return out;
}

void PrintXid(const Style& style, const XidInfo& xid) {
  std::printf("%s\n", style.Bold(fmt::format("Xid {}: {}", xid.code, xid.name)).c_str());
  if (!xid.mnemonic.empty()) std::printf("  mnemonic: %s\n", xid.mnemonic.c_str());
  std::printf("  severity: %s\n", EventSeverityName(xid.severity));
  std::printf("  causes:   %s\n", Join(xid.causes).c_str());
  if (!xid.also_kinds.empty()) {
    std::printf("  also:     %s (reported as extra events from the same line)\n", Join(xid.also_kinds).c_str());
  }
  std::printf("  action:   %s\n", xid.action.c_str());
}

std::string Hex(uint32_t value) { return fmt::format("0x{:08x}", value); }

// How the lines of Xid `code` are decoded (logs/event_details.h), when they are.
void PrintXidDecoding(const XidDecodeTables& tables, uint32_t code) {
  bool header = false;
  auto print_header = [&](const char* what) {
    if (!header) std::printf("  decoding: %s\n", what);
    header = true;
  };
  for (const NvLink5Row& row : tables.nvlink5) {
    if (row.xid != code) continue;
    print_header("unit, error status and sub-code (bits 20-25 of the interrupt info) of the line:");
    std::string subcode = row.subcode ? fmt::format(", sub-code {}", *row.subcode) : "";
    std::printf("    %-32s status %s%s: %s; %s, then %s\n", JoinNames(row.units).c_str(), Hex(row.error_status).c_str(),
                subcode.c_str(), row.fatal ? "fatal" : "non-fatal", row.immediate.c_str(), row.investigatory.c_str());
  }
  if (header) {
    for (const auto& [bucket, text] : tables.nvlink5_actions) std::printf("    %s: %s\n", bucket.c_str(), text.c_str());
  }
  if (code == 74) {
    print_header("the registers after the link number; bits set in registers 0, 2, 3 and 4 mean:");
    for (const Xid74Bits& bits : tables.xid74_bits) {
      std::string list;
      for (uint32_t bit : bits.bits) list += (list.empty() ? "" : ", ") + std::to_string(bit);
      std::printf("    register %u bits %s (%s): %s. %s\n", bits.register_index, list.c_str(),
                  EventSeverityName(bits.severity), bits.meaning.c_str(), bits.step.c_str());
    }
  }
  if (code == 154) {
    print_header("the recovery action the line names:");
    for (const RecoveryAction& action : tables.recovery_actions) {
      std::printf("    %-16s %s\n", action.action.c_str(), action.step.c_str());
    }
  }
}

void PrintSxid(const Style& style, const SxidInfo& sxid) {
  std::printf("%s\n", style.Bold(fmt::format("SXid {}: {}", sxid.code, sxid.name)).c_str());
  std::printf("  severity: %s (when the line does not say Fatal or Non-fatal itself)\n", EventSeverityName(sxid.severity));
  std::printf("  action:   %s\n", sxid.action.c_str());
}

void PrintKind(const Style& style, const KindInfo& kind) {
  std::printf("%s\n", style.Bold(kind.name + ": " + kind.title).c_str());
  std::printf("  severity: %s (usual; some lines raise or lower it)\n", EventSeverityName(kind.severity));
  std::printf("  scope:    %s\n", kind.scope == EventScope::kHost ? "host" : "GPU / driver");
  std::printf("  causes:   %s\n", Join(kind.causes).c_str());
  std::printf("  meaning:  %s\n", kind.cause.c_str());
  std::printf("  action:   %s\n", kind.action.c_str());
}

// " The nearest known Xids: 79 and 99." for a number not in the catalog, by
// the edits that make one from the other (typed numbers go wrong by a digit).
std::string NearestCodes(std::string_view what, const std::string& number_text, const std::vector<std::string>& codes) {
  std::vector<std::string> near = NearestNames(number_text, codes, {.max_distance = 2});
  if (near.empty()) return "";
  return fmt::format(" The nearest known {}{}: {}.", what, near.size() == 1 ? "" : "s", QuotedList(near, "and", ""));
}

// The words `explain` takes besides numbers: xid, sxid, the event kinds and every finding id.
std::vector<std::string> ExplainTopics(const LogCatalog& catalog, const HealthConfig& config) {
  std::vector<std::string> topics = {"xid", "sxid"};
  for (const KindInfo& kind : catalog.kinds()) topics.push_back(kind.name);
  auto add = [&topics](const auto& ids) {
    for (std::string_view id : ids) topics.emplace_back(id);
  };
  add(kRuleIds);
  add(kTrendDetectorIds);
  add(kEscalationIds);
  add(kAgentFindingIds);
  for (const CorrelationRule& rule : config.correlations.rules) topics.push_back(rule.id);
  return topics;
}

int ExplainSxid(const LogCatalog& catalog, const std::string& number_text, const GlobalOptions& global,
                const Style& style) {
  if (number_text.empty()) {  // every SXid
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const SxidInfo& sxid : catalog.sxids()) {
      if (global.json) {
        all.push_back(SxidInfoToJson(sxid));
      } else {
        std::printf("%5u  %-8s  %s\n", sxid.code, EventSeverityName(sxid.severity), sxid.name.c_str());
      }
    }
    if (global.json) std::printf("%s\n", JsonLine(all).c_str());
    return exit_code::kOk;
  }
  auto number = ParseInt<uint32_t>(number_text);
  const SxidInfo* sxid = number ? catalog.FindSxid(*number) : nullptr;
  if (sxid == nullptr) {
    std::vector<std::string> codes;
    for (const SxidInfo& known : catalog.sxids()) codes.push_back(std::to_string(known.code));
    std::fprintf(stderr, "gpudoctor explain: SXid %s is not in the catalog.%s (gpudoctor explain sxid lists them all)\n",
                 number_text.c_str(), NearestCodes("SXid", number_text, codes).c_str());
    return exit_code::kUsage;
  }
  if (global.json) {
    std::printf("%s\n", JsonLine(SxidInfoToJson(*sxid)).c_str());
  } else {
    PrintSxid(style, *sxid);
  }
  return exit_code::kOk;
}

// What a finding id is: a rule, a trend detector, a root-cause finding, an
// escalation or the agent's own; its category, settings, cause and actions as
// the config (built-in, or --config) has them. Empty `kind`: no such id.
struct FindingInfo {
  std::string id;
  std::string kind;
  std::string category;
  std::string checklist;  // the weekly checklist item it decides, if any
  std::string title;      // a root-cause finding's summary start
  std::vector<std::pair<std::string, std::string>> settings;
  Remedy remedy;
  std::string where;  // where the full description is
};

FindingInfo DescribeFinding(const HealthConfig& config, std::string_view id) {
  FindingInfo info{.id = std::string(id)};
  if (IsRuleId(id)) {
    info.kind = "rule (check, triage, report and the agent run it)";
    info.category = std::string(config.Category(id));
    for (const ChecklistEntry& entry : config.checklist)
      for (const std::string& rule : entry.rule_ids)
        if (rule == id) info.checklist = entry.title;
    info.settings = RuleThresholdValues(config, id);
    if (!config.Enabled(id)) info.settings.insert(info.settings.begin(), {"enabled", "false"});
    info.remedy = config.RemedyFor(id);
    info.where = fmt::format("docs/findings.md, `{}`; change it in [rules.{}] of a --config file", id, id);
  } else if (IsTrendDetectorId(id)) {
    info.kind = "trend detector (the agent judges a window of history; check and triage show it while it is open)";
    info.where = fmt::format("docs/detectors.md; thresholds in [detectors.{}]", id);
  } else if (const CorrelationRule* rule = config.correlations.Find(id)) {
    info.kind = fmt::format("correlation ({}): tells findings with one cause as one incident",
                            CorrelationKindName(rule->kind));
    info.category = rule->category;
    info.title = rule->title;
    if (!rule->enabled) info.settings.push_back({"enabled", "false"});
    info.remedy = rule->remedy;
    info.where = fmt::format("docs/findings.md, `{}`; change it in [correlations.{}]", id, id);
  } else if (IsEscalationId(id)) {
    info.kind = "escalation (the agent, over its history)";
    info.remedy = config.escalation.RemedyFor(id);
    info.where = fmt::format("docs/findings.md, `{}`; thresholds in [escalation]", id);
  } else if (std::find(std::begin(kAgentFindingIds), std::end(kAgentFindingIds), id) != std::end(kAgentFindingIds)) {
    info.kind = "the agent's own health";
    info.where = fmt::format("docs/findings.md, `{}`", id);
  }
  return info;
}

nlohmann::ordered_json FindingInfoToJson(const FindingInfo& info) {
  nlohmann::ordered_json json{{"id", info.id}, {"kind", info.kind}};
  json["category"] = info.category.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(info.category);
  json["checklist"] = info.checklist.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(info.checklist);
  nlohmann::ordered_json settings = nlohmann::ordered_json::object();
  for (const auto& [key, value] : info.settings) settings[key] = value;
  json["settings"] = std::move(settings);
  json["cause"] = info.remedy.cause;
  json["actions"] = info.remedy.actions;
  json["documentation"] = info.where;
  return json;
}

void PrintFindingInfo(const Style& style, const FindingInfo& info) {
  std::printf("%s\n", style.Bold(info.id + (info.title.empty() ? "" : ": " + info.title)).c_str());
  std::printf("  what:     %s\n", info.kind.c_str());
  if (!info.category.empty()) std::printf("  category: %s\n", info.category.c_str());
  if (!info.checklist.empty()) std::printf("  checklist: %s\n", info.checklist.c_str());
  for (const auto& [key, value] : info.settings) std::printf("  %-24s = %s\n", key.c_str(), value.c_str());
  if (!info.remedy.cause.empty()) std::printf("  cause:    %s\n", info.remedy.cause.c_str());
  for (size_t i = 0; i < info.remedy.actions.size(); ++i)
    std::printf("  %s %zu. %s\n", i == 0 ? "actions:" : "        ", i + 1, info.remedy.actions[i].c_str());
  std::printf("  more:     %s\n", info.where.c_str());
}

int RunExplain(const std::vector<std::string>& words, const CommandContext& context) {
  const GlobalOptions& global = context.options;
  const LogCatalog& catalog = LogCatalog::Builtin();
  Style style(global.color, stdout);
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "gpudoctor explain: %s\n", message.c_str());
    return exit_code::kUsage;
  };

  if (words.empty()) {  // every kind
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const KindInfo& kind : catalog.kinds()) {
      if (global.json) {
        all.push_back(KindInfoToJson(kind));
      } else {
        std::printf("%-24s %-9s %s\n", kind.name.c_str(), EventSeverityName(kind.severity), kind.title.c_str());
      }
    }
    if (global.json) std::printf("%s\n", JsonLine(all).c_str());
    return exit_code::kOk;
  }

  std::string first = ToLower(words[0]);
  // "explain 79" reads as "explain xid 79".
  bool is_xid = first == "xid" || ParseInt<uint32_t>(first).has_value();
  if (is_xid) {
    std::string number_text = first == "xid" ? (words.size() > 1 ? words[1] : "") : words[0];
    if (number_text.empty()) {  // every Xid
      nlohmann::ordered_json all = nlohmann::ordered_json::array();
      for (const XidInfo& xid : catalog.xids()) {
        if (global.json) {
          all.push_back(XidInfoToJson(xid));
        } else {
          std::printf("%4u  %-8s  %s\n", xid.code, EventSeverityName(xid.severity), xid.name.c_str());
        }
      }
      if (global.json) std::printf("%s\n", JsonLine(all).c_str());
      return exit_code::kOk;
    }
    auto number = ParseInt<uint32_t>(number_text);
    if (!number) return fail("'" + number_text + "' is not an Xid number");
    const XidInfo* xid = catalog.FindXid(*number);
    if (!xid) {
      std::vector<std::string> codes;
      for (const XidInfo& known : catalog.xids()) codes.push_back(std::to_string(known.code));
      return fail(fmt::format("Xid {} is not in the catalog.{} (gpudoctor explain xid lists them all)", *number,
                              NearestCodes("Xid", std::to_string(*number), codes)));
    }
    if (global.json) {
      nlohmann::ordered_json json = XidInfoToJson(*xid);
      json["decoding"] = XidDecodingToJson(catalog.decode(), xid->code);
      std::printf("%s\n", JsonLine(json).c_str());
    } else {
      PrintXid(style, *xid);
      PrintXidDecoding(catalog.decode(), xid->code);
    }
    return exit_code::kOk;
  }
  if (first == "sxid") return ExplainSxid(catalog, words.size() > 1 ? words[1] : "", global, style);

  const KindInfo* kind = catalog.FindKind(first);
  if (!kind) {
    CommandConfig loaded = LoadCommandConfig(context);
    if (loaded.error) {
      std::fprintf(stderr, "gpudoctor explain: %s\n", loaded.error->message.c_str());
      return loaded.error->exit_code;
    }
    FindingInfo info = DescribeFinding(loaded.config, first);
    if (info.kind.empty()) {
      return fail("'" + words[0] + "' is neither an event kind nor a finding id." +
                  DidYouMean(NearestNames(first, ExplainTopics(catalog, loaded.config))) +
                  " (gpudoctor explain lists the kinds; docs/findings.md the finding ids)");
    }
    if (global.json) std::printf("%s\n", JsonLine(FindingInfoToJson(info)).c_str());
    else PrintFindingInfo(style, info);
    return exit_code::kOk;
  }
  if (global.json) {
    std::printf("%s\n", JsonLine(KindInfoToJson(*kind)).c_str());
  } else {
    PrintKind(style, *kind);
  }
  return exit_code::kOk;
}

}  // namespace

void RegisterExplainCommand(CLI::App& app, CommandContext& context) {
  auto words = std::make_shared<std::vector<std::string>>();
  CLI::App* command =
      app.add_subcommand("explain", "What an Xid, an NVSwitch SXid, a log event kind or a finding means and what to do");
  command->add_option("topic", *words,
                      "xid N, N, sxid N, an event kind such as gpu_off_bus, or a finding id such as temperature_high; "
                      "nothing: list the event kinds");
  command->footer(
      "Examples:\n  gpudoctor explain xid 79\n  gpudoctor explain xid 149     how NVLink5 sub-codes are decoded\n"
      "  gpudoctor explain sxid 20034\n  gpudoctor explain pcie_aer\n  gpudoctor explain xid\n"
      "  gpudoctor explain temperature_high           a rule: its thresholds as configured, cause and actions\n"
      "  gpudoctor explain facility_cooling           a root-cause finding, an escalation, a trend detector");
  command->callback([&context, words] { context.exit_code = RunExplain(*words, context); });
}

}  // namespace gpudoctor
