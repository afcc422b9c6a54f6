#include "host/host_signals.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/test_data.h"

namespace gpudoctor {
namespace {

namespace fs = std::filesystem;
using std::chrono::hours;

std::string TreeRoot(const std::string& name) { return std::string(GPUDOCTOR_SOURCE_DIR) + "/testdata/host/" + name; }

// Answers each program with a canned result and remembers what was run.
class FakeCommands final : public CommandRunner {
 public:
  CommandResult Run(const std::vector<std::string>& argv, Duration) override {
    calls.push_back(argv);
    return answer;
  }
  CommandResult answer{CommandStatus::kNotInstalled, -1, "", "", "not installed"};
  std::vector<std::vector<std::string>> calls;
};

// A scratch directory removed when the test ends.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = fs::temp_directory_path() / ("gpudoctor_host_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void Touch(const std::string& relative, WallTime modified) const {
    fs::path file = path_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << "x";
    fs::last_write_time(file, std::chrono::file_clock::from_sys(modified));
  }

 private:
  fs::path path_;
};

TEST(CollectHostSignals, ReadsHealthyTree) {
  FakeCommands commands;
  LinuxHostEnv env(TreeRoot("healthy"), commands);
  HostConfig config;
  config.disk_paths = {"/"};
  config.processes = {"nvidia-persistenced", "cmdline:train.py", "nvidia-fabricmanager", "systemd"};
  HostSignals host = CollectHostSignals(config, env);

  ASSERT_TRUE(host.load.has_value());
  EXPECT_DOUBLE_EQ(host.load.value().one_minute, 3.52);
  EXPECT_EQ(host.online_cpus.value_or(0), 64u);
  ASSERT_TRUE(host.memory_pressure.has_value());
  EXPECT_DOUBLE_EQ(host.memory_pressure.value().full->avg60, 0.0);
  ASSERT_TRUE(host.memory.has_value());
  EXPECT_EQ(host.memory.value().available_bytes, 480000000ull * 1024);
  EXPECT_EQ(host.hung_task_reports.value_or(99), 0u);

  ASSERT_EQ(host.processes.size(), 4u);
  EXPECT_EQ(host.processes[0].pids.value(), std::vector<uint32_t>{812});  // comm is truncated, argv[0] is not
  EXPECT_EQ(host.processes[1].pids.value(), std::vector<uint32_t>{950});
  EXPECT_TRUE(host.processes[2].pids.value().empty());
  EXPECT_EQ(host.processes[3].pids.value(), std::vector<uint32_t>{1});

  ASSERT_TRUE(host.blocked_tasks.has_value());
  EXPECT_TRUE(host.blocked_tasks.value().empty());

  ASSERT_TRUE(host.pci_gpus.has_value());
  const auto& gpus = host.pci_gpus.value();
  ASSERT_EQ(gpus.size(), 2u);  // the audio function and the Intel bridge are not GPUs
  EXPECT_EQ(gpus[0].pci_bus_id, "0000:1b:00.0");
  EXPECT_EQ(gpus[0].device_id, 0x2330u);
  EXPECT_EQ(gpus[0].class_code, 0x030200u);
  EXPECT_EQ(gpus[0].driver, "nvidia");
  EXPECT_EQ(gpus[0].link.current_speed_gts.value_or(0), 32.0);
  EXPECT_EQ(gpus[0].link.max_width.value_or(0), 16u);

  ASSERT_TRUE(host.hwmon_sensors.has_value());
  const auto& sensors = host.hwmon_sensors.value();
  ASSERT_EQ(sensors.size(), 3u);
  EXPECT_EQ(sensors[0].source, "hwmon:coretemp");
  EXPECT_EQ(sensors[0].name, "Package id 0");
  EXPECT_EQ(sensors[0].value, 45.0);
  EXPECT_EQ(sensors[0].status, SensorStatus::kOk);
  EXPECT_EQ(sensors[1].kind, SensorKind::kFan);
  EXPECT_EQ(sensors[2].name, "Vcore");
  EXPECT_DOUBLE_EQ(*sensors[2].value, 1.204);

  EXPECT_EQ(host.nvidia_module_version.value_or(""), "550.54.15");
  EXPECT_EQ(host.nouveau_loaded.value_or(true), false);

  ASSERT_EQ(host.disks.size(), 1u);
  ASSERT_TRUE(host.disks[0].space.has_value());
  EXPECT_GT(host.disks[0].space.value().total_bytes, 0u);

  EXPECT_TRUE(host.ipmi_sensors.not_supported());
  ASSERT_EQ(commands.calls.size(), 1u);
  EXPECT_EQ(commands.calls[0], (std::vector<std::string>{"ipmitool", "sdr", "elist"}));
}

// gpudoctor sleeps in the kernel while it reads files, and its probe while
// it waits on NVML: neither is ever a blocked task of the host.
TEST(CollectHostSignals, BlockedTasksLeaveOutGpudoctorAndItsProbes) {
  FakeCommands commands;
  LinuxHostEnv env(TreeRoot("hung_tasks"), commands);
  HostSignals host = CollectHostSignals(HostConfig{}, env);

  ASSERT_TRUE(host.blocked_tasks.has_value());
  std::vector<uint32_t> pids;
  for (const BlockedTask& task : host.blocked_tasks.value()) pids.push_back(task.pid);
  EXPECT_EQ(pids, (std::vector<uint32_t>{4100, 4200, 4300, 4400, 4500}));
  EXPECT_EQ(host.hung_task_timeout_seconds.value_or(0), 120u);
  EXPECT_EQ(host.hung_task_reports.value_or(0), 1u);
}

TEST(CollectHostSignals, BlockedTasksCarryTheirIdentityAndTiesToTheNvidiaDriver) {
  FakeCommands commands;
  LinuxHostEnv env(TreeRoot("hung_tasks"), commands);
  HostSignals host = CollectHostSignals(HostConfig{}, env);
  ASSERT_TRUE(host.blocked_tasks.has_value());
  const std::vector<BlockedTask>& tasks = host.blocked_tasks.value();
  ASSERT_EQ(tasks.size(), 5u);

  const BlockedTask& rsync = tasks[0];
  EXPECT_EQ(rsync.start_time_ticks, 5000u);
  EXPECT_EQ(rsync.context_switches, std::optional<uint64_t>(42));
  EXPECT_EQ(rsync.wait_channel, "folio_wait_bit_common");
  EXPECT_TRUE(rsync.nvidia_ties.empty());

  // Device files by their descriptors, each once.
  EXPECT_EQ(tasks[1].nvidia_ties, (std::vector<std::string>{"/dev/nvidia0 open", "/dev/nvidiactl open"}));
  // The stack names the module; wchan alone is only a name.
  EXPECT_EQ(tasks[2].nvidia_ties, (std::vector<std::string>{"kernel stack in nvidia: os_acquire_mutex"}));
  EXPECT_EQ(tasks[3].name, "kworker/u64:3");
  EXPECT_EQ(tasks[3].nvidia_ties, (std::vector<std::string>{"waits in nvidia function _nv012345rm"}));
  EXPECT_EQ(tasks[4].wait_channel, "nvme_poll_cq");
  EXPECT_TRUE(tasks[4].nvidia_ties.empty());  // nvme is storage, not NVIDIA
}

TEST(ReadPciDevices, ReadsEachDeviceWithThePortAboveIt) {
  FakeCommands commands;
  LinuxHostEnv env(TreeRoot("pci_topology"), commands);
  Field<std::vector<PciDevice>> devices = ReadPciDevices(env);
  ASSERT_TRUE(devices.has_value());
  EXPECT_EQ(devices.value(), (std::vector<PciDevice>{{"0000:00:03.0", 0x8086, 0x060400, ""},
                                                     {"0000:00:1f.0", 0x8086, 0x060100, ""},
                                                     {"0000:01:00.0", 0x10de, 0x030200, "0000:00:03.0"}}));
  EXPECT_TRUE(devices.value()[2].IsNvidiaGpu());
  EXPECT_TRUE(devices.value()[0].IsBridge());
  EXPECT_TRUE(ReadPciDevices(LinuxHostEnv(TreeRoot("hung_tasks"), commands)).not_supported());
}

TEST(CollectHostSignals, ReadsFaultyTree) {
  FakeCommands commands;
  LinuxHostEnv env(TreeRoot("faulty"), commands);
  HostSignals host = CollectHostSignals(HostConfig{}, env);

  EXPECT_EQ(host.online_cpus.value_or(0), 16u);
  EXPECT_DOUBLE_EQ(host.memory_pressure.value().full->avg60, 25.25);
  EXPECT_FALSE(host.cpu_pressure.value().full.has_value());
  EXPECT_EQ(host.memory.value().swap_free_bytes, 0u);
  EXPECT_EQ(host.hung_task_reports.value_or(0), 3u);

  ASSERT_TRUE(host.blocked_tasks.has_value());
  const auto& blocked = host.blocked_tasks.value();
  ASSERT_EQ(blocked.size(), 2u);
  EXPECT_EQ(blocked[0].pid, 2001u);
  EXPECT_EQ(blocked[0].name, "nvidia-smi");
  EXPECT_EQ(blocked[0].wait_channel, "os_acquire_mutex");
  EXPECT_EQ(blocked[1].name, "my (odd) name");
  EXPECT_EQ(blocked[1].wait_channel, "");

  const auto& gpus = host.pci_gpus.value();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].link.current_speed_gts.value_or(0), 16.0);
  EXPECT_EQ(gpus[0].link.current_width.value_or(0), 8u);
  EXPECT_EQ(gpus[1].driver, "");
  EXPECT_TRUE(gpus[1].link.current_speed_gts.failed());
  EXPECT_TRUE(gpus[1].link.current_width.failed());
  EXPECT_EQ(gpus[1].link.max_width.value_or(0), 16u);

  const auto& sensors = host.hwmon_sensors.value();
  ASSERT_EQ(sensors.size(), 3u);
  EXPECT_EQ(sensors[0].name, "CPU_FAN");
  EXPECT_EQ(sensors[0].status, SensorStatus::kWarning);
  EXPECT_EQ(sensors[1].status, SensorStatus::kCritical);  // 101 C against a 100 C critical limit
  EXPECT_EQ(sensors[2].status, SensorStatus::kNoReading);

  EXPECT_EQ(host.nvidia_module_version.value_or(""), "550.54.14");
  EXPECT_EQ(host.nouveau_loaded.value_or(false), true);
}

TEST(CollectHostSignals, MissingSourcesAreNotAvailableNeverZero) {
  ScratchDir empty;
  FakeCommands commands;
  LinuxHostEnv env(empty.path().string(), commands);
  HostConfig config;
  config.processes = {"nvidia-persistenced"};
  config.disk_paths = {"/data"};
  config.backup_dirs = {"/backups"};
  HostSignals host = CollectHostSignals(config, env);

  EXPECT_TRUE(host.load.not_supported());
  EXPECT_TRUE(host.online_cpus.not_supported());
  EXPECT_TRUE(host.cpu_pressure.not_supported());
  EXPECT_TRUE(host.memory.not_supported());
  EXPECT_TRUE(host.blocked_tasks.not_supported());
  EXPECT_TRUE(host.hung_task_reports.not_supported());
  EXPECT_TRUE(host.processes.at(0).pids.not_supported());
  EXPECT_TRUE(host.pci_gpus.not_supported());
  EXPECT_TRUE(host.hwmon_sensors.not_supported());
  EXPECT_TRUE(host.nvidia_module_version.not_supported());
  EXPECT_TRUE(host.nouveau_loaded.not_supported());
  EXPECT_TRUE(host.disks.at(0).space.failed());  // a configured path that is missing is an error
  EXPECT_TRUE(host.backups.at(0).scan.failed());
}

TEST(CollectHostSignals, UnparsableFilesAreErrorsWithTheReason) {
  ScratchDir root;
  fs::create_directories(root.path() / "proc");
  std::ofstream(root.path() / "proc/loadavg") << "not a load average";
  FakeCommands commands;
  LinuxHostEnv env(root.path().string(), commands);
  HostSignals host = CollectHostSignals(HostConfig{}, env);
  ASSERT_TRUE(host.load.failed());
  EXPECT_NE(host.load.error().find("/proc/loadavg"), std::string::npos);
}

TEST(CollectHostSignals, ReadsIpmiThroughTheCommandRunner) {
  ScratchDir root;
  FakeCommands commands;
  commands.answer = {CommandStatus::kExited, 0, ReadSourceFile("testdata/host/ipmitool_sdr_elist.txt"), "", ""};
  LinuxHostEnv env(root.path().string(), commands);
  HostSignals host = CollectHostSignals(HostConfig{}, env);
  ASSERT_TRUE(host.ipmi_sensors.has_value());
  EXPECT_EQ(host.ipmi_sensors.value().size(), 17u);
}

TEST(CollectHostSignals, IpmiFailuresAreReported) {
  ScratchDir root;
  FakeCommands commands;
  LinuxHostEnv env(root.path().string(), commands);

  commands.answer = {CommandStatus::kExited, 1, "", "Could not open device at /dev/ipmi0\nmore\n", ""};
  Field<std::vector<Sensor>> sensors = CollectHostSignals(HostConfig{}, env).ipmi_sensors;
  ASSERT_TRUE(sensors.failed());
  EXPECT_NE(sensors.error().find("Could not open device at /dev/ipmi0"), std::string::npos);

  commands.answer = {CommandStatus::kTimedOut, -1, "", "", ""};
  EXPECT_TRUE(CollectHostSignals(HostConfig{}, env).ipmi_sensors.failed());

  HostConfig no_ipmi;
  no_ipmi.ipmi = false;
  commands.calls.clear();
  EXPECT_TRUE(CollectHostSignals(no_ipmi, env).ipmi_sensors.not_supported());
  EXPECT_TRUE(commands.calls.empty());
}

TEST(CollectHostSignals, FindsNewestFileInBackupDirectory) {
  ScratchDir root;
  const WallTime base{std::chrono::seconds{1'700'000'000}};
  root.Touch("backups/a/old.ckpt", base - hours(48));
  root.Touch("backups/b/c/newest.ckpt", base - hours(2));
  root.Touch("backups/middle.ckpt", base - hours(10));
  fs::create_directories(root.path() / "backups/empty");
  fs::create_directory_symlink(root.path() / "backups", root.path() / "backups/loop");  // must not be followed

  FakeCommands commands;
  LinuxHostEnv env(root.path().string(), commands);
  HostConfig config;
  config.backup_dirs = {"/backups", "/backups/empty"};
  HostSignals host = CollectHostSignals(config, env);

  ASSERT_EQ(host.backups.size(), 2u);
  ASSERT_TRUE(host.backups[0].scan.has_value());
  const BackupScan& scan = host.backups[0].scan.value();
  EXPECT_EQ(scan.files_examined, 3u);
  EXPECT_FALSE(scan.truncated);
  ASSERT_TRUE(scan.newest.has_value());
  EXPECT_EQ(scan.newest->path, "/backups/b/c/newest.ckpt");
  EXPECT_EQ(std::chrono::floor<std::chrono::seconds>(scan.newest->modified), base - hours(2));

  ASSERT_TRUE(host.backups[1].scan.has_value());
  EXPECT_FALSE(host.backups[1].scan.value().newest.has_value());
}

TEST(CollectHostSignals, BackupScanStopsAtLimits) {
  ScratchDir root;
  const WallTime base{std::chrono::seconds{1'700'000'000}};
  for (int i = 0; i < 5; ++i) root.Touch("b/f" + std::to_string(i), base);
  root.Touch("b/1/2/3/deep", base + hours(1));
  FakeCommands commands;
  LinuxHostEnv env(root.path().string(), commands);
  HostConfig config;
  config.backup_dirs = {"/b"};
  config.backup_scan_depth = 1;
  HostSignals host = CollectHostSignals(config, env);
  const BackupScan& scan = host.backups[0].scan.value();
  EXPECT_TRUE(scan.truncated);
  EXPECT_NE(scan.newest->path, "/b/1/2/3/deep");

  config.backup_scan_depth = 8;
  config.backup_scan_file_limit = 2;
  host = CollectHostSignals(config, env);
  EXPECT_TRUE(host.backups[0].scan.value().truncated);
  EXPECT_EQ(host.backups[0].scan.value().files_examined, 2u);
}

}  // namespace
}  // namespace gpudoctor
