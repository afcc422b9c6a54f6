// `gpudoctor explain xid N` / `gpudoctor explain KIND`: what an Xid or an
// event kind means, its likely causes and what to do, from the event catalog.
//
//   gpudoctor explain xid 79
//   gpudoctor explain pcie_aer --json
//   gpudoctor explain xid          every Xid, one per line

#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/terminal.h"
#include "common/text.h"
#include "logs/catalog.h"
#include "logs/event_json.h"

namespace gpudoctor {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "not stated" : out;
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

void PrintKind(const Style& style, const KindInfo& kind) {
  std::printf("%s\n", style.Bold(kind.name + ": " + kind.title).c_str());
  std::printf("  severity: %s (usual; some lines raise or lower it)\n", EventSeverityName(kind.severity));
  std::printf("  scope:    %s\n", kind.scope == EventScope::kHost ? "host" : "GPU / driver");
  std::printf("  causes:   %s\n", Join(kind.causes).c_str());
  std::printf("  meaning:  %s\n", kind.cause.c_str());
  std::printf("  action:   %s\n", kind.action.c_str());
}

int RunExplain(const std::vector<std::string>& words, const GlobalOptions& global) {
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
    if (!xid) return fail(fmt::format("Xid {} is not in the catalog (gpudoctor explain xid lists them all)", *number));
    if (global.json) {
      std::printf("%s\n", JsonLine(XidInfoToJson(*xid)).c_str());
    } else {
      PrintXid(style, *xid);
    }
    return exit_code::kOk;
  }

  const KindInfo* kind = catalog.FindKind(first);
  if (!kind) return fail("unknown event kind '" + words[0] + "' (gpudoctor explain lists them)");
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
  CLI::App* command = app.add_subcommand("explain", "What an Xid or a log event kind means and what to do about it");
  command->add_option("topic", *words, "xid N, N, or an event kind such as gpu_off_bus; nothing: list the kinds");
  command->footer("Examples:\n  gpudoctor explain xid 79\n  gpudoctor explain pcie_aer\n  gpudoctor explain xid");
  command->callback([&context, words] { context.exit_code = RunExplain(*words, context.options); });
}

}  // namespace gpudoctor
