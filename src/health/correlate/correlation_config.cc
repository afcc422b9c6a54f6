#include "health/correlate/correlation_config.h"

#include "health/correlate/correlation_config_toml.h"

#include <re2/re2.h>

#include <algorithm>
#include <array>

#include "common/text.h"
#include "health/health_config.h"
#include "health/rule_ids.h"
#include "health/toml_table_reader.h"

namespace gpudoctor {
namespace {

constexpr std::array kKinds = {CorrelationKind::kNamedCause, CorrelationKind::kAbsorb, CorrelationKind::kEventBurst,
                               CorrelationKind::kSharedCause};

std::optional<CorrelationKind> KindFromName(std::string_view name) {
  for (CorrelationKind kind : kKinds)
    if (name == CorrelationKindName(kind)) return kind;
  return std::nullopt;
}

bool IsFindingIdOfAnotherPart(std::string_view id) {
  return IsRuleId(id) || IsTrendDetectorId(id) || IsEscalationId(id) || id == kHistoryStoreFailingId;
}

void ReadRemedy(TomlTableReader& reader, Remedy& remedy) {
  reader.Read("cause", remedy.cause);
  reader.Read("actions", remedy.actions);
}

Status ReadBurstCases(const toml::node& node, const std::string& where, std::vector<BurstCase>& cases) {
  const toml::array* array = node.as_array();
  if (array == nullptr) return Error{where + ": expected an array of tables ([[...cases]])"};
  std::vector<BurstCase> read;
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::table* table = (*array)[i].as_table();
    const std::string item = where + "[" + std::to_string(i) + "]";
    if (table == nullptr) return Error{item + ": expected a table"};
    TomlTableReader reader(*table, item);
    BurstCase& burst_case = read.emplace_back();
    reader.Read("tag", burst_case.tag);
    reader.Read("category", burst_case.category);
    ReadRemedy(reader, burst_case.remedy);
    if (burst_case.tag.empty()) reader.Fail("tag", "every case needs the cause tag it applies to");
    if (std::string wrong = CheckRuleCategory(burst_case.category); !burst_case.category.empty() && !wrong.empty())
      reader.Fail("category", wrong);
    if (auto error = reader.Finish()) return *error;
  }
  cases = std::move(read);
  return {};
}

Status CheckRule(const CorrelationRule& rule, TomlTableReader& reader) {
  if (std::string wrong = CheckRuleCategory(rule.category); !rule.category.empty() && !wrong.empty())
    reader.Fail("category", wrong);
  if (rule.min_share <= 0 || rule.min_share > 1) reader.Fail("min_share", "expected a share above 0 and at most 1");
  if (rule.min_gpus == 0) reader.Fail("min_gpus", "expected at least 1");
  if (rule.within <= Duration::zero()) reader.Fail("within", "expected a duration above 0");
  if (rule.kind == CorrelationKind::kNamedCause) {
    if (rule.cause_regex.empty()) reader.Fail("cause_regex", "a named_cause rule needs one");
    else if (RE2(rule.cause_regex, RE2::Quiet).NumberOfCapturingGroups() < 1)
      reader.Fail("cause_regex", "needs a group around the Xid code");
  }
  if (rule.kind == CorrelationKind::kSharedCause && rule.gpu_rules.empty())
    reader.Fail("gpu_rules", "a shared_cause rule needs at least one");
  if (rule.kind == CorrelationKind::kAbsorb && (rule.roots.empty() || rule.members.empty()))
    reader.Fail("roots", "an absorb rule needs roots and members");
  if (auto error = reader.Finish()) return *error;
  return {};
}

Status ApplyCorrelation(const std::string& id, const toml::node& node, const std::string& where,
                        CorrelationConfig& config) {
  const toml::table* table = node.as_table();
  if (table == nullptr) return Error{where + ": expected a table"};
  if (IsFindingIdOfAnotherPart(id))
    return Error{where + ": '" + id + "' is the id of a rule, detector or escalation, not a correlation"};
  auto existing = std::find_if(config.rules.begin(), config.rules.end(),
                               [&](const CorrelationRule& rule) { return rule.id == id; });
  CorrelationRule rule = existing != config.rules.end() ? *existing : CorrelationRule{.id = id};

  TomlTableReader reader(*table, where);
  std::string kind_name;
  reader.Read("kind", kind_name);
  if (!kind_name.empty()) {
    auto kind = KindFromName(kind_name);
    if (!kind) return Error{where + ".kind: expected named_cause, absorb, event_burst or shared_cause"};
    rule.kind = *kind;
  } else if (existing == config.rules.end()) {
    return Error{where + ".kind: a new correlation needs its kind"};
  }
  reader.Read("enabled", rule.enabled);
  reader.Read("title", rule.title);
  reader.Read("category", rule.category);
  ReadRemedy(reader, rule.remedy);
  reader.Read("gpu_rules", rule.gpu_rules);
  reader.Read("companion_rules", rule.companion_rules);
  reader.Read("host_rules", rule.host_rules);
  reader.Read("explained_by", rule.explained_by);
  reader.Read("symptom", rule.symptom);
  reader.Read("min_share", rule.min_share);
  reader.Read("min_gpus", rule.min_gpus);
  reader.Read("within", rule.within);
  reader.ReadRegex("cause_regex", rule.cause_regex);
  reader.Read("roots", rule.roots);
  reader.Read("members", rule.members);
  reader.Read("any_subject", rule.any_subject);
  reader.ReadElsewhere("cases");
  if (const toml::node* cases = table->get("cases")) {
    if (Status status = ReadBurstCases(*cases, where + ".cases", rule.cases); !status) return status;
  }
  if (Status status = CheckRule(rule, reader); !status) return status;

  if (existing != config.rules.end()) *existing = std::move(rule);
  else config.rules.push_back(std::move(rule));
  std::stable_sort(config.rules.begin(), config.rules.end(), [](const CorrelationRule& a, const CorrelationRule& b) {
    return std::pair(static_cast<int>(a.kind), a.id) < std::pair(static_cast<int>(b.kind), b.id);
  });
  return {};
}

Status ApplyXidEscalations(const toml::table& xids, const std::string& where, EscalationConfig& config) {
  for (const auto& [key, node] : xids) {
    const std::string path = where + "." + std::string(key.str());
    auto code = ParseInt<uint32_t>(key.str());
    const toml::table* table = node.as_table();
    if (!code) return Error{path + ": expected an Xid code, as in [escalation.xid.79]"};
    if (table == nullptr) return Error{path + ": expected a table"};
    TomlTableReader reader(*table, path);
    XidEscalation& xid = config.xids[*code];
    auto read = [&](const char* name, std::optional<uint32_t>& field) {
      uint32_t value = field.value_or(0);
      reader.Read(name, value);
      if (table->contains(name)) field = value;
    };
    read("after_restarts", xid.after_restarts);
    read("fatal_count", xid.fatal_count);
    read("diagnose_count", xid.diagnose_count);
    if (auto error = reader.Finish()) return *error;
  }
  return {};
}

Status ApplyEscalation(const toml::node& node, const std::string& where, EscalationConfig& config) {
  const toml::table* table = node.as_table();
  if (table == nullptr) return Error{where + ": expected a table"};
  TomlTableReader reader(*table, where);
  reader.Read("enabled", config.enabled);
  reader.Read("lookback", config.lookback);
  reader.Read("occurrence_gap", config.occurrence_gap);
  reader.Read("after_restarts", config.after_restarts);
  reader.Read("fatal_count", config.fatal_count);
  reader.Read("fatal_window", config.fatal_window);
  reader.Read("diagnose_window", config.diagnose_window);
  reader.Read("remediation_count", config.remediation_count);
  reader.Read("remediation_window", config.remediation_window);
  reader.ReadElsewhere("xid");
  for (std::string_view id : kEscalationIds) {
    const std::string name(id);
    reader.ReadElsewhere(name.c_str());
    const toml::node* remedy_node = table->get(name);
    if (remedy_node == nullptr) continue;
    const toml::table* remedy_table = remedy_node->as_table();
    if (remedy_table == nullptr) return Error{where + "." + name + ": expected a table"};
    TomlTableReader remedy_reader(*remedy_table, where + "." + name);
    ReadRemedy(remedy_reader, config.remedies[name]);
    if (auto error = remedy_reader.Finish()) return *error;
  }
  if (auto error = reader.Finish()) return *error;
  if (const toml::node* xids = table->get("xid")) {
    const toml::table* xid_table = xids->as_table();
    if (xid_table == nullptr) return Error{where + ".xid: expected a table of Xid codes"};
    if (Status status = ApplyXidEscalations(*xid_table, where + ".xid", config); !status) return status;
  }
  return {};
}

}  // namespace

const char* CorrelationKindName(CorrelationKind kind) {
  switch (kind) {
    case CorrelationKind::kNamedCause: return "named_cause";
    case CorrelationKind::kAbsorb: return "absorb";
    case CorrelationKind::kEventBurst: return "event_burst";
    case CorrelationKind::kSharedCause: return "shared_cause";
  }
  return "shared_cause";
}

const CorrelationRule* CorrelationConfig::Find(std::string_view id) const {
  for (const CorrelationRule& rule : rules)
    if (rule.id == id) return &rule;
  return nullptr;
}

uint32_t EscalationConfig::AfterRestarts(uint32_t code, bool fatal) const {
  auto it = xids.find(code);
  if (it != xids.end() && it->second.after_restarts) return *it->second.after_restarts;
  return fatal ? after_restarts : 0;
}

uint32_t EscalationConfig::FatalCount(uint32_t code, bool fatal) const {
  auto it = xids.find(code);
  if (it != xids.end() && it->second.fatal_count) return *it->second.fatal_count;
  return fatal ? fatal_count : 0;
}

uint32_t EscalationConfig::DiagnoseCount(uint32_t code) const {
  auto it = xids.find(code);
  return it != xids.end() ? it->second.diagnose_count.value_or(0) : 0;
}

const Remedy& EscalationConfig::RemedyFor(std::string_view finding_id) const {
  static const Remedy kNone;
  auto it = remedies.find(finding_id);
  return it == remedies.end() ? kNone : it->second;
}

Status ApplyCorrelationTables(const toml::table& root, std::string_view origin, CorrelationConfig& correlations,
                              EscalationConfig& escalation) {
  const std::string prefix = std::string(origin) + ": ";
  if (const toml::node* node = root.get("correlations")) {
    const toml::table* table = node->as_table();
    if (table == nullptr) return Error{prefix + "correlations: expected a table"};
    for (const auto& [id, rule] : *table) {
      const std::string name(id.str());
      if (Status status = ApplyCorrelation(name, rule, prefix + "correlations." + name, correlations); !status)
        return status;
    }
  }
  if (const toml::node* node = root.get("escalation")) {
    if (Status status = ApplyEscalation(*node, prefix + "escalation", escalation); !status) return status;
  }
  return {};
}

}  // namespace gpudoctor
