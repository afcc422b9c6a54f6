#include "host/boot_identity.h"

#include "common/text.h"

namespace gpudoctor {

Result<BootIdentity> ReadBootIdentity(const HostEnv& env) {
  constexpr std::string_view kBootIdPath = "/proc/sys/kernel/random/boot_id";
  constexpr std::string_view kStatPath = "/proc/stat";
  auto boot_id = env.ReadFile(kBootIdPath, 4096);
  if (!boot_id) return boot_id.error();
  BootIdentity boot{.boot_id = std::string(Trim(*boot_id))};
  if (boot.boot_id.empty()) return Error{std::string(kBootIdPath) + ": empty"};
  auto stat = env.ReadFile(kStatPath);
  if (!stat) return stat.error();
  for (std::string_view line : Split(*stat, '\n')) {
    if (!line.starts_with("btime ")) continue;
    if (auto seconds = ParseInt<int64_t>(line.substr(6))) {
      boot.booted_at = WallTime{std::chrono::seconds(*seconds)};
      return boot;
    }
  }
  return Error{std::string(kStatPath) + ": no btime line"};
}

}  // namespace gpudoctor
