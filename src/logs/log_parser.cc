#include "logs/log_parser.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "logs/event_details.h"
#include "logs/log_time.h"

namespace gpudoctor {

namespace {

// Join key of the extra events an Xid line yields ("also" in the catalog).
constexpr uint32_t kAlsoPattern = std::numeric_limits<uint32_t>::max();
// Join key of the events the driver classifier makes.
constexpr uint32_t kDriverPattern = kAlsoPattern - 1;

bool Contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

EventField* FindField(LogEvent& event, std::string_view name) {
  for (EventField& field : event.fields) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

// Adds `value` to field `name`: sets it when absent; for an append field adds
// it to the list unless already there.
void AddField(LogEvent& event, const std::string& name, const std::string& value, bool append) {
  EventField* field = FindField(event, name);
  if (!field) {
    event.fields.push_back(EventField{name, value});
    return;
  }
  if (!append) return;
  for (std::string_view item : Split(field->value, ';')) {
    if (Trim(item) == value) return;
  }
  field->value += "; " + value;
}

// Moves the well-known fields into their LogEvent members; the rest become
// detail fields.
void AssignFields(LogEvent& event, const std::vector<EventField>& fields, const std::vector<std::string>& append) {
  for (const EventField& field : fields) {
    const std::string& name = field.name;
    if (name == "pci") {
      if (auto normalized = NormalizePciBusId(field.value)) {
        if (event.pci_bus_id.empty()) event.pci_bus_id = *normalized;
        continue;
      }
    } else if (name == "xid") {
      if (!event.xid) event.xid = ParseInt<uint32_t>(field.value);
      continue;
    } else if (name == "pid") {
      if (!event.pid) event.pid = ParseInt<uint32_t>(field.value);
      continue;
    } else if (name == "process") {
      if (event.process.empty()) event.process = field.value;
      continue;
    } else if (name == "uuid") {
      if (event.gpu_uuid.empty()) event.gpu_uuid = field.value;
      continue;
    } else if (name == "serial") {
      if (event.gpu_serial.empty()) event.gpu_serial = field.value;
      continue;
    } else if (name == "port" || name == "limiting_port") {
      if (auto normalized = NormalizePciBusId(field.value)) {
        AddField(event, name, *normalized, false);
        continue;
      }
    }
    AddField(event, name, field.value, Contains(append, name));
  }
}

// "aer_severity=Corrected, aer_type=Data Link Layer"; a field whose value is
// its own name (a flag such as "multiple") is written once.
std::string FormatDetail(const std::vector<EventField>& fields) {
  std::string out;
  for (const EventField& field : fields) {
    if (!out.empty()) out += ", ";
    out += field.name;
    if (!EqualsIgnoreCase(field.name, field.value)) {
      out += '=';
      out += field.value;
    }
  }
  return out;
}

// Whether `candidate` can belong to the same event as `open`: it names no
// other device, process or Xid, and no detail disagrees.
bool SameSubject(const LogEvent& open, const LogEvent& candidate) {
  if (!open.pci_bus_id.empty() && !candidate.pci_bus_id.empty() && open.pci_bus_id != candidate.pci_bus_id &&
      open.Field("port") != candidate.pci_bus_id) {
    return false;
  }
  if (open.pid && candidate.pid && *open.pid != *candidate.pid) return false;
  if (!open.process.empty() && !candidate.process.empty() && open.process != candidate.process) return false;
  if (open.xid && candidate.xid && *open.xid != *candidate.xid) return false;
  return true;
}

// Lines of one event are printed together; a line logged much later belongs
// to a new event even when it falls within the window.
bool CloseInTime(const LogEvent& open, const std::optional<WallTime>& time, const std::optional<double>& uptime) {
  constexpr double kMaxGapSeconds = 10;
  if (open.time && time) {
    auto gap = std::chrono::duration<double>(*time - *open.time).count();
    return gap >= -kMaxGapSeconds && gap <= kMaxGapSeconds;
  }
  if (open.uptime_seconds && uptime) {
    double gap = *uptime - *open.uptime_seconds;
    return gap >= -kMaxGapSeconds && gap <= kMaxGapSeconds;
  }
  return true;
}

bool CloseInTime(const LogEvent& open, const LogEvent& candidate) {
  return CloseInTime(open, candidate.time, candidate.uptime_seconds);
}

// The text after the "NVRM:" tag, when `text` starts with it.
std::optional<std::string_view> AfterNvrmTag(std::string_view text) {
  if (!StartsWith(text, "NVRM:")) return std::nullopt;
  return text.substr(5);
}

// Whether a line continues the message of the line before it. NVIDIA's driver
// prints multi-line messages as one kernel record, each line tagged "NVRM:",
// and the record reaches a log in one of three shapes:
//  - journalctl and dmesg indent the record's later lines and give them no prefix;
//  - a syslog daemon that does not escape line breaks writes them raw, so a
//    line with no prefix follows the prefixed first line;
//  - dumps indent their lines after the tag ("NVRM:     Reported by ...").
//
// `after_prefixed_nvrm` says whether the line before was the driver's with a prefix: a raw line
// continues only such a line (reading it needs nothing of a line that holds no literal).
bool ContinuesPreviousLine(const LinePrefix& prefix, bool after_prefixed_nvrm) {
  std::optional<std::string_view> after_tag = AfterNvrmTag(Trim(prefix.message));
  if (!after_tag) return false;
  if (prefix.format == LineFormat::kBare && (prefix.indented || after_prefixed_nvrm)) return true;
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  return after_tag->size() > 2 && blank((*after_tag)[0]) && blank((*after_tag)[1]);
}

// A record's line breaks escaped inside one line: "#012" (rsyslog) or "\x0a"
// (/dev/kmsg). Fills `unfolded` with the lines joined by spaces, each later
// line without its "NVRM:" tag; false when there is none.
bool UnfoldEscapedLineBreaks(std::string_view message, std::string& unfolded) {
  constexpr std::string_view kBreaks[] = {"#012", "\\x0a"};
  std::string_view escape;
  for (std::string_view candidate : kBreaks) {
    if (message.find(candidate) != std::string_view::npos) {
      escape = candidate;
      break;
    }
  }
  if (escape.empty()) return false;
  unfolded.clear();
  for (size_t start = 0; start <= message.size();) {
    size_t end = std::min(message.find(escape, start), message.size());
    std::string_view piece = Trim(message.substr(start, end - start));
    if (!unfolded.empty()) piece = Trim(AfterNvrmTag(piece).value_or(piece));
    if (!piece.empty()) {
      if (!unfolded.empty()) unfolded += ' ';
      unfolded += piece;
    }
    start = end + escape.size();
  }
  return true;
}

bool DetailsAgree(const LogEvent& open, const LogEvent& candidate) {
  for (const EventField& field : candidate.fields) {
    std::string_view existing = open.Field(field.name);
    if (!existing.empty() && existing != field.value) return false;
  }
  return true;
}

void MergeInto(LogEvent& open, const LogEvent& addition, const std::vector<std::string>& append) {
  if (open.pci_bus_id.empty()) open.pci_bus_id = addition.pci_bus_id;
  if (!open.xid) open.xid = addition.xid;
  if (!open.pid) open.pid = addition.pid;
  if (open.process.empty()) open.process = addition.process;
  if (open.gpu_uuid.empty()) open.gpu_uuid = addition.gpu_uuid;
  if (open.gpu_serial.empty()) open.gpu_serial = addition.gpu_serial;
  if (!open.time) {
    open.time = addition.time;
    open.time_is_utc = addition.time_is_utc;
    open.time_estimated = addition.time_estimated;
  }
  if (!open.uptime_seconds) open.uptime_seconds = addition.uptime_seconds;
  for (const EventField& field : addition.fields) AddField(open, field.name, field.value, Contains(append, field.name));
}

// A line that is one JSON object wrapping a log line: `journalctl -o json` ("MESSAGE", "_HOSTNAME",
// "__REALTIME_TIMESTAMP"), Docker's json-file driver and `kubectl logs` of it ("log", "time"), and the
// JSON logs of agents that quote the kernel line they read ("line", as gpud does). Fills `wrapped` with
// the inner line; false when the line is no such object.
bool UnwrapJsonLine(std::string_view line, std::string& wrapped, std::string& host, std::optional<WallTime>& time) {
  if (line.empty() || line.front() != '{' || line.back() != '}') return false;
  nlohmann::json object = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!object.is_object()) return false;
  const nlohmann::json* inner = nullptr;
  for (const char* key : {"MESSAGE", "log", "line"}) {
    auto it = object.find(key);
    if (it != object.end() && it->is_string()) {
      inner = &*it;
      break;
    }
  }
  if (!inner) return false;
  wrapped = inner->get<std::string>();
  while (!wrapped.empty() && (wrapped.back() == '\n' || wrapped.back() == '\r')) wrapped.pop_back();
  host.clear();
  time.reset();
  if (auto it = object.find("_HOSTNAME"); it != object.end() && it->is_string()) host = it->get<std::string>();
  if (auto it = object.find("__REALTIME_TIMESTAMP"); it != object.end() && it->is_string()) {
    if (auto micros = ParseInt<int64_t>(it->get<std::string>())) {
      time = WallTime{std::chrono::duration_cast<WallTime::duration>(std::chrono::microseconds(*micros))};
    }
  } else if (auto it = object.find("time"); it != object.end() && it->is_string()) {
    if (auto parsed = ParseTimeBound(it->get<std::string>(), WallTime{}, 0)) time = *parsed;
  }
  return true;
}

}  // namespace

LogParser::LogParser(ParseOptions options, std::shared_ptr<const LineMatcher> matcher)
    : options_(std::move(options)), matcher_(std::move(matcher)), scratch_(*matcher_) {
  if (options_.prefix.reference_time == WallTime{}) {
    options_.prefix.reference_time = SystemClock::Instance().Now();
  }
}

void LogParser::Feed(std::string_view line, uint64_t line_number, std::vector<LogEvent>& out,
                     std::optional<std::span<const uint32_t>> candidates) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  // A JSON-wrapped line is read as the line it wraps; the event's raw text stays the JSON.
  const bool wrapped = UnwrapJsonLine(line, json_.text, json_.host, json_.time);
  LinePrefix prefix = ParseLinePrefix(wrapped ? std::string_view(json_.text) : line, options_.prefix);
  if (wrapped) {
    if (!prefix.time && json_.time) {
      prefix.time = json_.time;
      prefix.time_is_utc = true;
    }
    if (prefix.host.empty()) prefix.host = json_.host;
  }
  if (options_.prefix.learned == LineFormat::kBare) {
    learned_prefix_.Note(prefix.format);
    options_.prefix.learned = learned_prefix_.learned();
  }
  if (prefix.format == LineFormat::kDmesgMinute && minute_stamps_enabled_) minute_stamp_ = prefix.time;
  if (prefix.format == LineFormat::kBroadcastHeader) {
    broadcast_.line = line_number;
    broadcast_.time = prefix.time;
    broadcast_.time_estimated = prefix.time_estimated;
    broadcast_.host = std::string(prefix.host);
  } else if (prefix.format == LineFormat::kBroadcastBody && broadcast_.line + 1 == line_number) {
    prefix.time = broadcast_.time;
    prefix.time_estimated = broadcast_.time_estimated;
    prefix.host = broadcast_.host;
  }
  if (UnfoldEscapedLineBreaks(prefix.message, unfolded_)) prefix.message = unfolded_;
  // Close the events this line can no longer belong to: past their window, or logged well before
  // it. Only a line that may be part of an event closes one by its time (see the header).
  const std::string_view text = wrapped ? std::string_view(json_.text) : line;
  if (candidates && !wrapped) candidates_.assign(candidates->begin(), candidates->end());
  else matcher_->Candidates(text, scratch_, candidates_);
  const bool relevant = !candidates_.empty() || Reached(line_number);
  for (size_t i = open_.size(); i-- > 0;) {
    if (open_[i].last_line < line_number ||
        (relevant && !CloseInTime(open_[i].event, prefix.time, prefix.uptime_seconds))) {
      Close(i);
    }
  }

  const bool after_prefixed_nvrm = prefixed_nvrm_line_ != 0 && prefixed_nvrm_line_ + 1 == line_number;
  const bool continues = ContinuesPreviousLine(prefix, after_prefixed_nvrm);
  if (prefix.format != LineFormat::kBare && AfterNvrmTag(Trim(prefix.message))) prefixed_nvrm_line_ = line_number;
  last_line_ = line_number;
  const bool joined = continues && JoinWrappedLine(prefix, line, line_number);
  if (joined) {
    if (record_.last_line + 1 == line_number) record_.last_line = line_number;
  } else if (continues && JoinRecord(prefix, line, line_number)) {
    // The record's lines together made an event; the line is part of it.
  } else {
    const bool recognised = MatchLine(prefix, line, line_number, candidates_);
    if (!recognised) ClassifyDriverLine(prefix, line, line_number);
    if (!continues) StartRecord(prefix, line, line_number, recognised);
  }
  Release(out);
}

void LogParser::Took(OpenEvent& open, uint64_t line_number) {
  open.taken_line = line_number;
  if (open.reach) open.reach_until = std::min(open.last_line, line_number + *open.reach);
}

const std::vector<EventField>* LogParser::MatchPattern(uint32_t index, std::string_view message) {
  if (memos_.empty()) memos_.resize(matcher_->pattern_count());
  Memo& memo = memos_[index];
  if (!memo.filled || memo.message != message) {
    memo.matched = matcher_->Match(index, message, scratch_, memo.fields);
    memo.message.assign(message);
    memo.filled = true;
  }
  return memo.matched ? &memo.fields : nullptr;
}

bool LogParser::Reached(uint64_t line_number) const {
  for (const OpenEvent& open : open_) {
    if (open.reach_until >= line_number) return true;
  }
  return false;
}

bool LogParser::MatchLine(const LinePrefix& prefix, std::string_view raw, uint64_t line_number,
                          std::vector<uint32_t>& candidates) {
  for (const OpenEvent& open : open_) {
    if (open.reach_until < line_number) continue;
    for (uint32_t index : matcher_->ContinuationsOf(open.event.kind)) {
      const std::optional<uint32_t> reach = matcher_->pattern(index).reach_lines;
      if (!reach || line_number <= open.taken_line + *reach) candidates.push_back(index);
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  const uint32_t pattern_count = matcher_->pattern_count();
  bool identity_checked = false;
  bool recognised = false;  // a pattern made or joined an event, or the line names a GPU
  bool matched = false;     // a pattern took the line, or one that starts events matched it
  bool fallbacks = false;
  for (uint32_t index : candidates) {
    if (index >= pattern_count) {
      if (identity_checked) continue;
      identity_checked = true;
      if (auto identity = matcher_->MatchIdentity(prefix.message, scratch_, fields_)) {
        NoteIdentity(*identity, fields_, line_number);
        recognised = true;
      }
      continue;
    }
    const PatternSpec& spec = matcher_->pattern(index);
    if (spec.fallback) {
      fallbacks = true;
      continue;
    }
    if (const std::vector<EventField>* fields = MatchPattern(index, prefix.message)) {
      const bool applied = ApplyPattern(index, *fields, prefix, raw, line_number);
      // A report's later line while no report of its kind is open (the log lost or cut its first line)
      // is left to the fallbacks, so that it still counts as what it shows. With one open, the line
      // belongs to another report printed in between.
      if (applied || spec.role != PatternRole::kContinue || FindOpen(spec.kind)) matched = true;
      if (applied) recognised = true;
    }
  }
  // A line of a multi-line report that joined its report is not a report of its own.
  for (size_t i = 0; fallbacks && !matched && i < candidates.size(); ++i) {
    const uint32_t index = candidates[i];
    if (index >= pattern_count || !matcher_->pattern(index).fallback) continue;
    const std::vector<EventField>* fields = MatchPattern(index, prefix.message);
    if (fields && ApplyPattern(index, *fields, prefix, raw, line_number)) recognised = true;
  }
  return recognised;
}

void LogParser::StartRecord(const LinePrefix& prefix, std::string_view line, uint64_t line_number, bool recognised) {
  record_.line = 0;
  std::string_view message = Trim(prefix.message);
  // Only the driver's records are continued on lines of their own (ContinuesPreviousLine).
  if (!StartsWith(message, "NVRM:")) return;
  record_.line = line_number;
  record_.last_line = line_number;
  record_.taken = recognised;
  record_.prefix = prefix;
  record_.host.assign(prefix.host);
  record_.program.assign(prefix.program);
  record_.level.assign(prefix.level);
  record_.message.assign(message);
  record_.raw.assign(line);
}

bool LogParser::JoinRecord(const LinePrefix& prefix, std::string_view line, uint64_t line_number) {
  if (record_.line == 0 || record_.last_line + 1 != line_number) return false;
  record_.last_line = line_number;
  std::string_view tail = Trim(AfterNvrmTag(Trim(prefix.message)).value_or(""));
  if (!tail.empty()) {
    record_.message += ' ';
    record_.message += tail;
  }
  record_.raw += '\n';
  record_.raw += line;
  if (record_.taken || record_.last_line - record_.line > kRecordLines) return false;
  LinePrefix joined = record_.prefix;
  joined.host = record_.host;
  joined.program = record_.program;
  joined.level = record_.level;
  joined.message = record_.message;
  // Only the patterns: the head line alone already went to the driver classifier.
  matcher_->Candidates(record_.message, scratch_, record_candidates_);
  if (!MatchLine(joined, record_.raw, record_.line, record_candidates_)) return false;
  record_.taken = true;
  for (OpenEvent& open : open_) {
    if (open.event.line_number != record_.line) continue;
    open.message_end_line = line_number;
    Took(open, line_number);
  }
  return true;
}

void LogParser::ClassifyDriverLine(const LinePrefix& prefix, std::string_view line, uint64_t line_number) {
  // Only lines that start with the RM's tag or name a driver module reach the classifier.
  std::string_view message = Trim(prefix.message);
  if (!StartsWith(message, "NVRM:") && message.find("nvidia-") == std::string_view::npos) return;
  // Only a line the fast reader's scan finds: a module's name elsewhere is text about the module.
  if (!matcher_->ScanFinds(line, scratch_)) return;
  const DriverClassifier& driver = matcher_->driver();
  const DriverClassification verdict = driver.Classify(message);
  if (verdict.verdict != DriverVerdict::kError) return;
  const DriverSubsystem* subsystem = verdict.subsystem;
  LogEvent event = NewEvent(prefix, line, line_number);
  event.kind = subsystem ? subsystem->kind : driver.tables().generic_kind;
  event.severity = subsystem && subsystem->severity ? *subsystem->severity
                                                    : matcher_->catalog().SeverityOf(event.kind, std::nullopt);
  std::vector<EventField> fields;
  fields.push_back(EventField{"subsystem", subsystem ? subsystem->name : std::string("unknown")});
  if (!verdict.line.function.empty()) fields.push_back(EventField{"function", std::string(verdict.line.function)});
  if (!verdict.line.gpu_instance.empty()) {
    fields.push_back(EventField{"gpu_instance", std::string(verdict.line.gpu_instance)});
  }
  if (verdict.line.module != "NVRM") fields.push_back(EventField{"module", std::string(verdict.line.module)});
  if (!verdict.line.pci.empty()) fields.push_back(EventField{"pci", std::string(verdict.line.pci)});
  AssignFields(event, fields, {});
  if (event.kind == driver.tables().generic_kind) ++generic_driver_lines_;
  StartEvent(std::move(event), kDriverPattern, std::nullopt, line_number);
}

void LogParser::Flush(std::vector<LogEvent>& out) {
  while (!open_.empty()) Close(open_.size() - 1);
  Release(out);
}

LogEvent LogParser::NewEvent(const LinePrefix& prefix, std::string_view line, uint64_t line_number) const {
  LogEvent event;
  event.time = prefix.time;
  event.time_is_utc = prefix.time_is_utc;
  event.time_estimated = prefix.time_estimated;
  event.uptime_seconds = prefix.uptime_seconds;
  if (!event.time && prefix.format == LineFormat::kDmesgDelta && minute_stamp_) {
    event.time = minute_stamp_;
    event.time_estimated = true;
  }
  if (!event.time && event.uptime_seconds && options_.boot_time) {
    if (std::optional<Duration> since_boot = DurationFromSeconds(*event.uptime_seconds)) {
      event.time = *options_.boot_time + std::chrono::duration_cast<WallTime::duration>(*since_boot);
      event.time_is_utc = true;
    }
  }
  event.host = prefix.host.empty() ? options_.host : std::string(prefix.host);
  event.message = std::string(Trim(prefix.message));
  event.raw = std::string(line);
  event.source = options_.source;
  event.line_number = line_number;
  return event;
}

bool LogParser::ApplyPattern(uint32_t index, const std::vector<EventField>& fields, const LinePrefix& prefix,
                             std::string_view line, uint64_t line_number) {
  const PatternSpec& spec = matcher_->pattern(index);
  const LogCatalog& catalog = matcher_->catalog();
  LogEvent event = NewEvent(prefix, line, line_number);
  event.kind = spec.kind;
  AssignFields(event, fields, spec.append);

  std::optional<EventSeverity> stated = spec.severity;
  if (!spec.severity_from.empty()) {
    auto it = spec.severity_map.find(ToLower(event.Field(spec.severity_from)));
    if (it != spec.severity_map.end()) stated = it->second;
  }
  event.severity = stated.value_or(catalog.SeverityOf(spec.kind, event.xid));

  if (spec.role == PatternRole::kContinue) {
    OpenEvent* open = FindOpen(spec.kind, event.pci_bus_id);
    if (!open || !SameSubject(open->event, event) || !CloseInTime(open->event, event)) return false;
    event.pci_bus_id.clear();  // a detail line's device is the open event's device
    MergeInto(open->event, event, spec.append);
    Took(*open, line_number);
    if (stated) open->event.severity = std::max(open->event.severity, *stated);
    return true;
  }

  // The kinds an Xid also stands for are made from the event before it moves on; they start after it.
  std::vector<LogEvent> extras;
  if (spec.kind == "xid" && event.xid) {
    if (const XidInfo* info = catalog.FindXid(*event.xid)) {
      for (const std::string& kind : info->also_kinds) {
        LogEvent& extra = extras.emplace_back(event);
        extra.kind = kind;
        extra.severity = catalog.SeverityOf(kind, std::nullopt);
        extra.xid.reset();
        extra.fields.insert(extra.fields.begin(), EventField{"from_xid", std::to_string(*event.xid)});
      }
    }
  }
  if (spec.role == PatternRole::kStart) StartEvent(std::move(event), index, index, line_number);
  else MergeOrStart(std::move(event), index, index, line_number);
  for (LogEvent& extra : extras) MergeOrStart(std::move(extra), kAlsoPattern, std::nullopt, line_number);
  return true;
}

void LogParser::StartEvent(LogEvent&& event, uint32_t join_key, std::optional<uint32_t> origin,
                           uint64_t line_number) {
  // Reports of several devices printed at once (an error that reached every NVSwitch, AER reports of two
  // devices) interleave their lines: each device's stays open for its own later lines.
  for (size_t i = 0; i < open_.size(); ++i) {
    const LogEvent& open = open_[i].event;
    const bool other_device =
        !open.pci_bus_id.empty() && !event.pci_bus_id.empty() && open.pci_bus_id != event.pci_bus_id;
    if (open.kind == event.kind && !other_device) {
      Close(i);
      break;
    }
  }
  const KindInfo* kind = matcher_->catalog().FindKind(event.kind);
  uint32_t window = kind ? kind->window_lines : 0;
  if (origin && matcher_->pattern(*origin).window_lines) window = *matcher_->pattern(*origin).window_lines;
  const uint64_t start_order = next_start_order_++;
  if (window == 0) {
    closed_.emplace_back(std::move(event), start_order);
    return;
  }
  OpenEvent& open = open_.emplace_back();
  open.event = std::move(event);
  open.start_order = start_order;
  open.joined.push_back(join_key);
  open.last_line = line_number + window;
  open.origin = origin;
  open.message_end_line = line_number;
  for (uint32_t index : matcher_->ContinuationsOf(open.event.kind)) {
    const uint32_t reach = matcher_->pattern(index).reach_lines.value_or(window);
    open.reach = std::max(open.reach.value_or(0), reach);
  }
  Took(open, line_number);
}

void LogParser::MergeOrStart(LogEvent&& event, uint32_t join_key, std::optional<uint32_t> origin,
                             uint64_t line_number) {
  OpenEvent* open = FindOpen(event.kind, event.pci_bus_id);
  if (open && std::find(open->joined.begin(), open->joined.end(), join_key) == open->joined.end() &&
      SameSubject(open->event, event) && CloseInTime(open->event, event) && DetailsAgree(open->event, event)) {
    const std::vector<std::string>& append =
        join_key == kAlsoPattern ? std::vector<std::string>{} : matcher_->pattern(join_key).append;
    EventSeverity severity = std::max(open->event.severity, event.severity);
    MergeInto(open->event, event, append);
    open->event.severity = severity;
    open->joined.push_back(join_key);
    Took(*open, line_number);
    return;
  }
  StartEvent(std::move(event), join_key, origin, line_number);
}

bool LogParser::JoinWrappedLine(const LinePrefix& prefix, std::string_view line, uint64_t line_number) {
  std::string_view tail = Trim(AfterNvrmTag(Trim(prefix.message)).value_or(""));
  bool joined = false;
  for (OpenEvent& open : open_) {
    // Only an event whose message ended on the line just before continues.
    if (open.message_end_line + 1 != line_number) continue;
    open.event.message += " ";
    open.event.message += tail;
    open.event.raw += "\n";
    open.event.raw += line;
    open.message_end_line = line_number;
    Took(open, line_number);
    if (open.origin && matcher_->Match(*open.origin, open.event.message, scratch_, fields_)) {
      LogEvent refreshed;
      AssignFields(refreshed, fields_, matcher_->pattern(*open.origin).append);
      MergeInto(open.event, refreshed, {});
    }
    joined = true;
  }
  return joined;
}

void LogParser::NoteIdentity(IdentityLine kind, const std::vector<EventField>& fields, uint64_t line_number) {
  std::string pci, uuid, serial;
  for (const EventField& field : fields) {
    if (field.name == "pci") pci = NormalizePciBusId(field.value).value_or("");
    if (field.name == "uuid") uuid = field.value;
    if (field.name == "serial") serial = field.value;
  }
  // Boards without a serial number report "0".
  if (serial == "0") serial.clear();
  switch (kind) {
    case IdentityLine::kUuid:
      if (pci.empty()) return;
      uuid_by_pci_[pci] = uuid;
      last_gpu_at_pci_ = pci;
      last_gpu_at_line_ = line_number;
      break;
    case IdentityLine::kBoardSerial:
      // The driver prints it right after "GPU at PCI:...".
      if (!last_gpu_at_pci_.empty() && !serial.empty() && line_number - last_gpu_at_line_ <= 4) {
        serial_by_pci_[last_gpu_at_pci_] = serial;
      }
      break;
    case IdentityLine::kSerial:
      if (!pci.empty() && !serial.empty()) serial_by_pci_[pci] = serial;
      break;
  }
}

LogParser::OpenEvent* LogParser::FindOpen(std::string_view kind, std::string_view pci) {
  OpenEvent* latest = nullptr;
  for (OpenEvent& open : open_) {
    if (open.event.kind != kind) continue;
    if (!pci.empty() && open.event.pci_bus_id == pci) return &open;
    latest = &open;
  }
  return latest;
}

void LogParser::Close(size_t open_index) {
  closed_.emplace_back(std::move(open_[open_index].event), open_[open_index].start_order);
  open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(open_index));
}

void LogParser::FillIdentity(LogEvent& event) const {
  if (event.pci_bus_id.empty()) return;
  if (event.gpu_uuid.empty()) {
    if (auto it = uuid_by_pci_.find(event.pci_bus_id); it != uuid_by_pci_.end()) event.gpu_uuid = it->second;
  }
  if (event.gpu_serial.empty()) {
    if (auto it = serial_by_pci_.find(event.pci_bus_id); it != serial_by_pci_.end()) event.gpu_serial = it->second;
  }
}

void LogParser::Release(std::vector<LogEvent>& out) {
  if (closed_.empty()) return;
  uint64_t horizon = std::numeric_limits<uint64_t>::max();
  for (const OpenEvent& open : open_) horizon = std::min(horizon, open.event.line_number);
  auto key = [this](uint32_t i) { return std::pair(closed_[i].event.line_number, closed_[i].start_order); };
  // Sorted by index: a LogEvent is a dozen strings, too heavy to move around in a sort.
  release_order_.resize(closed_.size());
  std::iota(release_order_.begin(), release_order_.end(), 0u);
  const bool in_order = std::is_sorted(release_order_.begin(), release_order_.end(),
                                       [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  if (!in_order) {
    std::sort(release_order_.begin(), release_order_.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  }
  size_t released = 0;
  for (; released < release_order_.size(); ++released) {
    LogEvent& event = closed_[release_order_[released]].event;
    if (event.line_number >= horizon) break;
    FillIdentity(event);
    // Decoded once the event is whole: a wrapped message is joined by now.
    DecodeEventDetails(matcher_->catalog(), event);
    event.detail = FormatDetail(event.fields);
    out.push_back(std::move(event));
  }
  if (released == closed_.size()) {
    closed_.clear();
  } else if (released > 0 || !in_order) {
    // What waits keeps its order, so that the next release mostly finds it sorted.
    kept_.clear();
    for (size_t i = released; i < release_order_.size(); ++i) kept_.push_back(std::move(closed_[release_order_[i]]));
    closed_.swap(kept_);
  }
}

std::vector<LogEvent> ParseLine(std::string_view line, const ParseOptions& options) {
  LogParser parser(options);
  std::vector<LogEvent> events;
  parser.Feed(line, 1, events);
  parser.Flush(events);
  return events;
}

std::vector<LogEvent> ParseText(std::string_view text, const ParseOptions& options) {
  LogParser parser(options);
  std::vector<LogEvent> events;
  uint64_t line_number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    parser.Feed(text.substr(start, end - start), ++line_number, events);
    start = end + 1;
  }
  parser.Flush(events);
  return events;
}

}  // namespace gpudoctor
