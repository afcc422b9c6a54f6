// `gpudoctor report`: a support bundle (tar.gz) with everything a vendor or
// a colleague needs to judge the server: the snapshot and findings as JSON,
// versions, an excerpt of the kernel log, `nvidia-smi -q` and the config.
//
// The bundle is written atomically (a temporary file in the target directory,
// fsync, rename), so a reader never sees half a bundle, and privately (0600
// less the umask). Secrets never enter it (src/redact): the config's webhook
// credentials, exec hook arguments and secret-named keys, and credentials in
// any text. --redact also replaces host names, GPU serials and UUIDs and IP
// addresses with placeholders.
//
// The archive is plain ustar (POSIX.1-1988) compressed with zlib: a few
// regular files need no more than a 512-byte header each.

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <re2/re2.h>

#include "cli/check_inputs.h"
#include "cli/commands.h"
#include "cli/version.h"
#include "common/gzip.h"
#include "common/input_file.h"
#include "common/json_text.h"
#include "common/text.h"
#include "health/checklist.h"
#include "health/embedded_data.h"
#include "health/finding_json.h"
#include "host/command_runner.h"
#include "logs/byte_source.h"
#include "logs/follow.h"
#include "model/snapshot_json.h"
#include "redact/secrets.h"

namespace gpudoctor {
namespace {

struct BundleFile {
  std::string name;
  std::string contents;
};

// ---- Archive ----------------------------------------------------------------

void PutOctal(char* field, size_t width, uint64_t value) {
  // width - 1 octal digits and a NUL, as ustar expects.
  std::string digits = fmt::format("{:0{}o}", value, width - 1);
  std::memcpy(field, digits.data(), std::min(digits.size(), width - 1));
}

// One ustar member: `directory/name`, owned by root, mode 0600: unpacked, it
// stays as private as the bundle.
void AppendTarMember(std::string& tar, const std::string& directory, const BundleFile& file, int64_t mtime) {
  std::array<char, 512> header{};
  std::memcpy(header.data(), file.name.data(), std::min<size_t>(file.name.size(), 99));
  PutOctal(&header[100], 8, 0600);
  PutOctal(&header[108], 8, 0);
  PutOctal(&header[116], 8, 0);
  PutOctal(&header[124], 12, file.contents.size());
  PutOctal(&header[136], 12, static_cast<uint64_t>(std::max<int64_t>(mtime, 0)));
  header[156] = '0';
  std::memcpy(&header[257], "ustar", 6);
  std::memcpy(&header[263], "00", 2);
  std::memcpy(&header[265], "root", 4);
  std::memcpy(&header[297], "root", 4);
  std::memcpy(&header[345], directory.data(), std::min<size_t>(directory.size(), 154));
  std::memset(&header[148], ' ', 8);
  unsigned checksum = 0;
  for (char c : header) checksum += static_cast<unsigned char>(c);
  std::string sum = fmt::format("{:06o}", checksum);
  std::memcpy(&header[148], sum.c_str(), 7);  // six digits, NUL, and the space left from above
  tar.append(header.data(), header.size());
  tar += file.contents;
  tar.append((512 - file.contents.size() % 512) % 512, '\0');
}

// Writes `bytes` to `path` through a temporary file in the same directory.
// mkstemp creates it 0600 less the umask, and its mode is never widened.
Status WriteAtomically(const std::string& path, const std::string& bytes) {
  std::filesystem::path target(path);
  std::string directory = target.has_parent_path() ? target.parent_path().string() : ".";
  std::string temp = directory + "/." + target.filename().string() + ".XXXXXX";
  int fd = mkstemp(temp.data());
  if (fd < 0) return Error{fmt::format("{}: cannot create a file in {}: {}", path, directory, std::strerror(errno))};
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const int error = written < bytes.size() ? errno : 0;
  const bool ok = written == bytes.size() && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(temp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(error != 0 ? error : errno);
    unlink(temp.c_str());
    return Error{fmt::format("{}: cannot write: {}", path, why)};
  }
  return {};
}

// ---- Redaction --------------------------------------------------------------

// Replaces what identifies the site: the given names and serials, GPU UUIDs,
// serial number fields and IP addresses.
class Redactor {
 public:
  void AddLiteral(const std::string& text, const std::string& placeholder) {
    if (text.size() >= 2) literals_.push_back({text, placeholder});
  }

  std::string Apply(std::string text) const {
    // Longest first, so "node1.example.com" goes before "node1".
    auto literals = literals_;
    std::sort(literals.begin(), literals.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    for (const auto& [literal, placeholder] : literals) {
      for (size_t at = text.find(literal); at != std::string::npos; at = text.find(literal, at + placeholder.size()))
        text.replace(at, literal.size(), placeholder);
    }
    RE2::GlobalReplace(&text, uuid_, "GPU-REDACTED");
    RE2::GlobalReplace(&text, serial_field_, "\\1REDACTED");
    RE2::GlobalReplace(&text, ipv4_, "x.x.x.x");
    RE2::GlobalReplace(&text, ipv6_, "x:x:x:x");
    return text;
  }

 private:
  std::vector<std::pair<std::string, std::string>> literals_;
  RE2 uuid_{R"((?i)\bGPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b)"};
  RE2 serial_field_{R"((?i)((?:serial(?: number)?|serial_number|"serial")\s*[:=,]?\s*"?)[A-Za-z0-9-]{4,})"};
  RE2 ipv4_{R"(\b(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}\b)"};
  // Full and "::"-compressed forms with at least three groups; PCI ids (0000:3b:00.0) have a dot.
  RE2 ipv6_{R"((?i)\b(?:[0-9a-f]{1,4}:){2,7}(?::|[0-9a-f]{1,4})(?:[0-9a-f]{0,4}:?)*\b|::(?:[0-9a-f]{1,4}:){0,6}[0-9a-f]{1,4}\b)"};
};

// ---- Bundle contents ---------------------------------------------------------

std::string Uname() {
  utsname names{};
  if (uname(&names) != 0) return "not available";
  return fmt::format("{} {} {} {}", names.sysname, names.release, names.version, names.machine);
}

template <typename T>
std::string Text(const Field<T>& field) {
  if (field.has_value()) {
    if constexpr (std::is_same_v<T, std::string>) return field.value();
    else return std::to_string(field.value());
  }
  return field.failed() ? "error" : "not available";
}

std::string Versions(const CheckRun& run) {
  std::string text = VersionText(DescribeThisBuild());
  text += "driver " + Text(run.gathered.snapshot.driver_version) + "\n";
  text += "nvml " + Text(run.gathered.snapshot.nvml_version) + "\n";
  text += "cuda_driver " + Text(run.gathered.snapshot.cuda_driver_version) + "\n";
  text += "nvidia_module " + (run.gathered.host ? Text(run.gathered.host->nvidia_module_version) : std::string("not collected")) + "\n";
  text += "kernel " + Uname() + "\n";
  return text;
}

// The last `count` lines of a file (gzip decoded), or an error line.
std::string LastLines(const std::string& path, size_t count) {
  auto source = OpenLogFile(path);
  if (!source) return "# " + path + ": " + source.error().message + "\n";
  std::deque<std::string> lines;
  std::string partial;
  std::array<char, 65536> buffer;
  for (;;) {
    auto n = (*source)->Read(buffer.data(), buffer.size());
    if (!n || *n == 0) break;
    partial.append(buffer.data(), *n);
    size_t start = 0;
    for (size_t end; (end = partial.find('\n', start)) != std::string::npos; start = end + 1) {
      lines.emplace_back(partial, start, end - start);
      if (lines.size() > count) lines.pop_front();
    }
    partial.erase(0, start);
  }
  if (!partial.empty()) lines.push_back(partial);
  if (lines.size() > count) lines.pop_front();
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

std::string LastLinesOf(const std::string& text, size_t count) {
  size_t at = text.size();
  for (size_t seen = 0; at > 0 && seen <= count;) {
    at = text.rfind('\n', at - 1);
    if (at == std::string::npos) return text;
    ++seen;
    if (seen > count) return text.substr(at + 1);
  }
  return text;
}

std::string KernelLogExcerpt(const CheckRun& run, const CheckOptions& options, size_t line_count, CommandRunner& runner) {
  std::string text = "# GPU events\n";
  if (!run.gathered.events) text += "# (no log read)\n";
  else
    for (const LogEvent& event : *run.gathered.events) {
      if (event.severity == EventSeverity::kInfo && event.kind != "xid") continue;
      // A folded storm (logs/event_collector.h) is its last line and a count.
      if (event.repeats > 0) text += fmt::format("# ... {} more lines of the same before this one\n", event.repeats);
      text += fmt::format("{}:{}: {}\n", event.source, event.line_number, event.raw);
    }
  text += fmt::format("\n# Last {} lines\n", line_count);
  if (!options.log_files.empty()) {
    for (const std::string& file : options.log_files) text += "## " + file + "\n" + LastLines(file, line_count);
  } else if (run.gathered.live_log_path == "/dev/kmsg") {
    CommandResult r = runner.Run({"dmesg"}, std::chrono::seconds(20));
    text += r.status == CommandStatus::kExited && r.exit_code == 0 ? LastLinesOf(r.output, line_count)
                                                                  : "# dmesg: not available\n";
  } else if (run.gathered.live_log_path == "journalctl") {
    CommandResult r = runner.Run({"journalctl", "-k", "--no-pager", "-n", std::to_string(line_count)},
                                 std::chrono::seconds(20));
    text += r.status == CommandStatus::kExited && r.exit_code == 0 ? r.output : "# journalctl: not available\n";
  } else if (!run.gathered.live_log_path.empty()) {
    text += LastLines(run.gathered.live_log_path, line_count);
  } else {
    text += "# kernel log not available\n";
  }
  return text;
}

// The config file as `check` read it (the same rule and limit) with its
// secrets masked, or why it cannot be.
std::string ConfigFileText(const std::string& path) {
  auto text = ReadInputFile(path, kMaxConfigFileBytes);
  return text ? RedactConfigSecrets(*text) : "# " + text.error().message + "\n";
}

std::string TimeStamp(WallTime time) {
  std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y%m%dT%H%M%SZ", &utc);
  return buffer;
}

std::string SafeName(std::string text) {
  for (char& c : text)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') c = '_';
  return text.empty() ? "unknown" : text.substr(0, 64);
}

struct ReportOptions {
  CheckOptions check;
  std::string output;
  bool redact = false;
  size_t log_lines = 200;
};

}  // namespace

void RegisterReportCommand(CLI::App& app, CommandContext& context) {
  auto* command = app.add_subcommand("report", "Write a support bundle (tar.gz) with the evidence for support");
  auto options = std::make_shared<ReportOptions>();
  AddCheckInputOptions(command, options->check);
  command->add_option("--output,-o", options->output,
                      "Bundle to write (default gpudoctor-report-<host>-<time>.tar.gz in the current directory)");
  command->add_flag("--redact", options->redact,
                    "Also replace host names, GPU serials and UUIDs and IP addresses (secrets are always masked)");
  command->add_option("--log-lines", options->log_lines, "Kernel log lines to include")->capture_default_str();
  command->footer(
      "The bundle holds snapshot.json, findings.json, versions.txt, kernel-log.txt, nvidia-smi-q.txt (when\n"
      "nvidia-smi is installed), config.toml and sources.json. It is written atomically, mode 0600.\n"
      "Secrets are always masked: webhook URL credentials, paths and queries, header values, exec hook\n"
      "arguments, any config key named like a password, token or key, and credentials in logs.\n"
      "Exit status: 0 written, 73 the bundle could not be written, 64/65/66 bad input.");
  command->callback([&context, options] {
    CheckRun run = RunChecks(context, options->check);
    if (run.error) {
      std::fprintf(stderr, "gpudoctor report: %s\n", run.error->message.c_str());
      context.exit_code = run.error->exit_code;
      return;
    }
    SubprocessRunner runner;
    const WallTime now = SystemClock::Instance().Now();

    Redactor redactor;
    if (options->redact) {
      char name[256] = {};
      if (gethostname(name, sizeof name - 1) == 0) redactor.AddLiteral(name, "redacted-host");
      redactor.AddLiteral(run.gathered.snapshot.hostname, "redacted-host");
      if (run.gathered.events)
        for (const LogEvent& e : *run.gathered.events) redactor.AddLiteral(e.host, "redacted-host");
      for (const GpuSnapshot& gpu : run.gathered.snapshot.gpus) {
        if (gpu.serial.has_value()) redactor.AddLiteral(gpu.serial.value(), "REDACTED-SERIAL");
        if (gpu.uuid.has_value()) redactor.AddLiteral(gpu.uuid.value(), "GPU-REDACTED");
      }
    }
    const std::string host = options->redact ? "redacted-host" : SafeName(run.gathered.snapshot.hostname);
    const std::string directory = fmt::format("gpudoctor-report-{}-{}", host, TimeStamp(now));
    const std::string output = options->output.empty() ? directory + ".tar.gz" : options->output;

    nlohmann::json findings;
    findings["status"] = SeverityName(run.assessment.worst);
    findings["checklist"] = ChecklistToJson(run.assessment.checklist, run.assessment.findings);
    findings["findings"] = FindingsToJson(run.assessment.findings);
    nlohmann::json sources = nlohmann::json::array();
    for (const SourceNote& s : run.gathered.sources) sources.push_back({{"source", s.source}, {"status", s.status}, {"detail", s.detail}});

    std::vector<BundleFile> files = {
        {"snapshot.json", ToJsonText(SnapshotToJson(run.gathered.snapshot), 2) + "\n"},
        {"findings.json", ToJsonText(findings, 2) + "\n"},
        {"versions.txt", Versions(run)},
        {"kernel-log.txt", KernelLogExcerpt(run, options->check, options->log_lines, runner)},
    };
    CommandResult smi = runner.Run({"nvidia-smi", "-q"}, std::chrono::seconds(30));
    if (smi.status == CommandStatus::kExited) files.push_back({"nvidia-smi-q.txt", smi.output + smi.errors});
    else if (smi.status == CommandStatus::kTimedOut) files.push_back({"nvidia-smi-q.txt", "# nvidia-smi -q timed out after 30 s\n"});
    sources.push_back({{"source", "nvidia-smi -q"},
                       {"status", smi.status == CommandStatus::kExited ? "read" : "not available"},
                       {"detail", smi.status == CommandStatus::kNotInstalled ? "not installed" : smi.message}});
    files.push_back({"config.toml", context.options.config_path.empty()
                                        ? std::string("# built-in defaults (no --config given)\n") + kRulesToml
                                        : ConfigFileText(context.options.config_path)});
    files.push_back({"sources.json", ToJsonText(sources, 2) + "\n"});

    std::string tar;
    const int64_t mtime = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    for (BundleFile& file : files) {
      file.contents = RedactTextSecrets(file.contents);
      if (options->redact) file.contents = redactor.Apply(std::move(file.contents));
      AppendTarMember(tar, directory, file, mtime);
    }
    tar.append(1024, '\0');  // two empty blocks end the archive
    auto compressed = Gzip(tar, GzipLevel::kSmallest);
    Status written = compressed ? WriteAtomically(output, *compressed) : Status(compressed.error());
    if (!written.ok()) {
      std::fprintf(stderr, "gpudoctor report: %s\n", written.error().message.c_str());
      context.exit_code = exit_code::kCannotCreate;
      return;
    }
    if (context.options.json) {
      nlohmann::json json = {{"path", output}, {"status", SeverityName(run.assessment.worst)}};
      for (const BundleFile& file : files) json["files"].push_back(directory + "/" + file.name);
      std::printf("%s\n", ToJsonText(json, 2).c_str());
    } else {
      std::printf("Wrote %s (%zu files%s)\n", output.c_str(), files.size(), options->redact ? ", redacted" : "");
    }
    context.exit_code = exit_code::kOk;
  });
}

}  // namespace gpudoctor
