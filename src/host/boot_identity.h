// BootIdentity: which boot of the host this is, so the agent's history can
// tell that an Xid came back after a reboot.
//
//   LinuxHostEnv env("/", runner);
//   Result<BootIdentity> boot = ReadBootIdentity(env);
//   // boot->boot_id "3f2a6c1e-...", boot->booted_at 2024-05-01T06:12:40Z
#pragma once

#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "host/host_env.h"

namespace gpudoctor {

struct BootIdentity {
  std::string boot_id;  // /proc/sys/kernel/random/boot_id: new at every boot
  WallTime booted_at;   // /proc/stat btime
};

// An error names the file that could not be read or understood.
Result<BootIdentity> ReadBootIdentity(const HostEnv& env);

}  // namespace gpudoctor
