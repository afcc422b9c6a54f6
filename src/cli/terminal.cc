#include "cli/terminal.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "cli/terminal_guard.h"
#include "health/correlate/correlate.h"

namespace gpudoctor {

Style::Style(const std::string& mode, std::FILE* stream) {
  if (mode == "always") color_ = true;
  else if (mode == "never") color_ = false;
  else {
    const char* term = std::getenv("TERM");
    color_ = isatty(OutputDescriptor(stream)) && std::getenv("NO_COLOR") == nullptr && term && std::string(term) != "dumb";
  }
}

std::string Style::Wrap(const char* code, const std::string& text) const {
  return color_ ? std::string("\033[") + code + "m" + text + "\033[0m" : text;
}

std::string Style::Bold(const std::string& text) const { return Wrap("1", text); }
std::string Style::Dim(const std::string& text) const { return Wrap("2", text); }

std::string Style::Severity(gpudoctor::Severity severity) const {
  switch (severity) {
    case Severity::kOk: return Wrap("32", "OK");
    case Severity::kWarning: return Wrap("33", "WARNING");
    case Severity::kCritical: return Wrap("1;31", "CRITICAL");
    case Severity::kUnknown: return Wrap("35", "UNKNOWN");
  }
  return "UNKNOWN";
}

void PrintFindings(std::FILE* out, const Style& style, const std::vector<Finding>& findings, bool include_ok) {
  std::vector<const Finding*> sorted;
  const RootIndex roots(findings);
  for (const auto& f : findings)
    if ((include_ok || f.severity != Severity::kOk) && !roots.ToldUnderRoot(f)) sorted.push_back(&f);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Finding* a, const Finding* b) {
    return SeverityRank(a->severity) > SeverityRank(b->severity);
  });
  for (const Finding* f : sorted) {
    std::fprintf(out, "%s %s: %s\n", style.Severity(f->severity).c_str(), style.Bold(f->id).c_str(),
                 f->summary.c_str());
    for (const auto& e : f->evidence) std::fprintf(out, "    evidence: %s\n", e.c_str());
    if (!f->cause.empty()) std::fprintf(out, "    cause:    %s\n", f->cause.c_str());
    for (size_t i = 0; i < f->actions.size(); ++i)
      std::fprintf(out, "    %s %zu. %s\n", i == 0 ? "do:" : "   ", i + 1, f->actions[i].c_str());
  }
}

void PrintRememberedIdentities(std::FILE* out, const Style& style, const Assessment& assessment) {
  bool header = false;
  for (const GpuVerdict& gpu : assessment.gpus) {
    const IdentityKnowledge knowledge = gpu.Knowledge();
    if (knowledge == IdentityKnowledge::kRead) continue;
    const bool unknown = knowledge == IdentityKnowledge::kUnknown;
    if (!header) std::fprintf(out, "\n%s\n", style.Bold("GPUs that could not say which card they are").c_str());
    header = true;
    if (unknown) {
      std::fprintf(out,
                   "  GPU %-3u identity unknown: no UUID, serial or PCI address was read, and no history or kernel "
                   "log line names it (a running agent remembers each card for next time)\n",
                   gpu.index);
      continue;
    }
    std::vector<std::string> parts;
    if (!gpu.name.empty()) parts.push_back(gpu.name);
    if (!gpu.identity.serial.empty()) parts.push_back("serial " + gpu.identity.serial);
    if (!gpu.identity.uuid.empty()) parts.push_back(gpu.identity.uuid);
    if (!gpu.identity.pci_bus_id.empty()) parts.push_back("at " + gpu.identity.pci_bus_id);
    std::string line;
    for (const std::string& part : parts) line += (line.empty() ? "" : ", ") + part;
    std::fprintf(out, "  GPU %-3u %s (from %s)\n", gpu.index, line.c_str(), gpu.identity_source.c_str());
  }
}

}  // namespace gpudoctor
