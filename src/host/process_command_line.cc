#include "host/process_command_line.h"

#include "common/text.h"

namespace gpudoctor {

std::vector<std::string> ProcessCommandLine(const HostEnv& host, uint32_t pid, const std::string& name) {
  const std::string dir = "/proc/" + std::to_string(pid);
  Result<std::string> cmdline = host.ReadFile(dir + "/cmdline", 64 << 10);
  if (!cmdline || cmdline->empty()) return {};
  if (cmdline->back() == '\0') cmdline->pop_back();
  std::vector<std::string> argv;
  for (std::string_view arg : Split(*cmdline, '\0')) argv.emplace_back(arg);
  if (name.empty()) return argv;
  auto base = [](std::string_view path) { return path.substr(path.rfind('/') + 1); };
  auto same = [](std::string_view a, std::string_view b) {
    return !a.empty() && !b.empty() && (StartsWith(a, b) || StartsWith(b, a));
  };
  Result<std::string> comm = host.ReadFile(dir + "/comm", 256);
  const std::string_view named = base(name);
  if ((comm && same(Trim(*comm), named)) || same(base(argv.front()), named)) return argv;
  return {};
}

ProcessCommandLines CommandLinesFrom(const HostEnv& host) {
  return [&host](uint32_t pid, const std::string& name) { return ProcessCommandLine(host, pid, name); };
}

}  // namespace gpudoctor
