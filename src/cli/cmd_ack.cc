// `gpudoctor ack ID|KEY`: an operator has dealt with a finding. Records the
// acknowledgement in the agent's history (a remediation, docs/store.md); the
// agent reads it at its next sample, resolves the incident (and those that are
// part of it) as acknowledged, and opens a new incident only if the fault
// returns: after clearing, worse, or with a newer event.
//
//   gpudoctor ack 17 --note "reseated GPU 3, replaced the riser" --reset
//   gpudoctor ack 'xid_recent@GPU-8e1c.../79'
//
// Exit codes: 0 recorded (or nothing to do: already resolved), 64 bad
// arguments or no such incident, 65 not a usable history, 66 the file cannot
// be opened, 73 the acknowledgement could not be written.

#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "store/incident_json.h"
#include "cli/commands.h"
#include "common/input_file.h"
#include "common/json_text.h"
#include "common/text.h"
#include "store/sqlite_store.h"

namespace gpudoctor {
namespace {

struct AckOptions {
  std::string incident;  // an incident id or a finding key
  std::string database = kDefaultHistoryDatabase;
  std::string note;
  std::string actor;
  bool gpu_reset = false;
};

// Who acknowledges: --by, else the user behind sudo, else this process's user.
std::string Actor(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* sudo_user = std::getenv("SUDO_USER"); sudo_user != nullptr && *sudo_user != '\0') return sudo_user;
  if (const passwd* user = getpwuid(getuid()); user != nullptr) return user->pw_name;
  return std::to_string(getuid());
}

// The incident `selector` names: by id, else the open incident with that key,
// else the latest with it.
std::optional<StoredFinding> FindIncident(const std::vector<StoredFinding>& newest_first, std::string_view selector) {
  if (auto id = ParseInt<int64_t>(selector)) {
    for (const StoredFinding& incident : newest_first)
      if (incident.incident_id == *id) return incident;
    return std::nullopt;
  }
  std::optional<StoredFinding> latest;
  for (const StoredFinding& incident : newest_first) {
    if (incident.key != selector) continue;
    if (incident.open()) return incident;
    if (!latest) latest = incident;
  }
  return latest;
}

std::string Describe(const StoredFinding& incident) {
  const Finding& finding = incident.finding;
  return fmt::format("incident {} ({} {}: {})", incident.incident_id, SeverityName(finding.severity), finding.id,
                     finding.summary);
}

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "gpudoctor ack: %s\n", message.c_str());
  return code;
}

void PrintJson(const nlohmann::json& json) {
  std::printf("%s\n", ToJsonText(json, 2).c_str());
}

int RunAck(const AckOptions& options, const GlobalOptions& global) {
  if (auto file = InputFile::Open(options.database); !file)
    return Fail(exit_code::kNoInput, "--db: " + file.error().message + " (the agent's --db; is it running here?)");
  auto store = SqliteHistoryStore::Open(options.database, SqliteStoreOptions{});
  if (!store) return Fail(exit_code::kDataError, store.error().message);
  auto incidents = (*store)->QueryFindings({.from = WallTime{}, .until = WallTime::max()});
  if (!incidents) return Fail(exit_code::kDataError, incidents.error().message);
  std::optional<StoredFinding> incident = FindIncident(*incidents, options.incident);
  if (!incident) {
    return Fail(exit_code::kUsage, fmt::format("no incident '{}' in {}; `gpudoctor history --findings --open` lists "
                                               "the open ones with their ids and keys",
                                               options.incident, options.database));
  }

  if (!incident->open()) {
    const std::string resolved = FormatIsoUtc(*incident->resolved_at);
    if (global.json) {
      PrintJson({{"acknowledged", false},
                 {"reason", "already resolved at " + resolved},
                 {"incident", StoredFindingToJson(*incident)}});
    } else {
      std::printf("Nothing to acknowledge: %s was resolved at %s.\n", Describe(*incident).c_str(), resolved.c_str());
    }
    return exit_code::kOk;
  }

  const Remediation ack{.kind = Remediation::Kind::kAck,
                        .at = SystemClock::Instance().Now(),
                        .incident_id = incident->incident_id,
                        .incident_key = incident->key,
                        .severity = incident->finding.severity,
                        .gpu = incident->finding.gpu,
                        .gpu_reset = options.gpu_reset,
                        .actor = Actor(options.actor),
                        .note = options.note};
  auto id = (*store)->RecordRemediation(ack);
  if (!id) return Fail(exit_code::kCannotCreate, "cannot record the acknowledgement: " + id.error().message);
  if (global.json) {
    PrintJson({{"acknowledged", true},
               {"remediation_id", *id},
               {"acknowledged_at", FormatIsoUtc(ack.at)},
               {"by", ack.actor},
               {"note", ack.note},
               {"gpu_reset", ack.gpu_reset},
               {"incident", StoredFindingToJson(*incident)}});
  } else {
    std::printf("Acknowledged %s.\nThe agent resolves it at its next sample; if the fault returns, it opens a new "
                "incident.\n",
                Describe(*incident).c_str());
  }
  return exit_code::kOk;
}

}  // namespace

void RegisterAckCommand(CLI::App& app, CommandContext& context) {
  auto options = std::make_shared<AckOptions>();
  CLI::App* command =
      app.add_subcommand("ack", "Acknowledge a finding you have dealt with: the agent resolves it and records it");
  command->add_option("incident", options->incident,
                      "The incident's id, or its finding key (gpudoctor history --findings --open lists both)")
      ->required();
  command->add_option("--note", options->note, "What was done, kept in the history (\"reseated GPU 3\")");
  command->add_flag("--reset", options->gpu_reset,
                    "You also reset the finding's GPU (nvidia-smi -r leaves no trace gpudoctor can read): an Xid "
                    "that comes back afterwards counts as outliving a restart");
  command->add_option("--by", options->actor, "Who acknowledges (default: $SUDO_USER, else your user name)");
  command->add_option("--db", options->database, "History file of `gpudoctor agent`")->capture_default_str();
  command->footer(
      "An acknowledgement says: I have dealt with this. The agent reads it at its next sample and resolves\n"
      "the incident (and the findings that are part of it) as acknowledged, so it stops alerting. While the\n"
      "finding stays as it was, it stays quiet; it opens a new incident when it returns after clearing, gets\n"
      "worse, or shows a newer event (another Xid). Every acknowledgement counts as a remediation: five of one\n"
      "GPU within 7 days escalate to remediation_repeated (contact support). `gpudoctor history --findings`\n"
      "shows them.\n"
      "Examples:\n"
      "  gpudoctor history --findings --open            the open incidents, with ids and keys\n"
      "  gpudoctor ack 17 --note \"cleaned the filters\"\n"
      "  gpudoctor ack 'xid_recent@GPU-8e1c.../79' --reset --note \"nvidia-smi -r -i 3\"\n"
      "Exit status: 0 recorded (or already resolved), 64 bad arguments or no such incident,\n"
      "65 not a usable gpudoctor history, 66 the file cannot be opened, 73 it could not be written.");
  command->callback([options, &context] { context.exit_code = RunAck(*options, context.options); });
}

}  // namespace gpudoctor
