#include "nvml/collector.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include "model/gpu_fields.h"
#include "model/snapshot_json.h"
#include "nvml/probe.h"

namespace gpudoctor {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

const std::string kBin = std::string(GPUDOCTOR_BINARY_DIR) + "/bin/";
const std::string kExamples = std::string(GPUDOCTOR_SOURCE_DIR) + "/examples/";

CollectorOptions Options(const std::string& scenario, Duration deadline = seconds(10)) {
  CollectorOptions options;
  options.probe_executable = kBin + "gpudoctor-probe";
  options.library_path = kBin + "libgpudoctor_fake_nvml.so";
  options.scenario_path = scenario.empty() || scenario[0] == '/' ? scenario : kExamples + scenario;
  options.deadline = deadline;
  return options;
}

std::string WriteScenario(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// One snapshot of the scenario `toml`, written to a file called `name`.
Snapshot CollectScenario(const std::string& name, const std::string& toml) {
  NvmlCollector collector(Options(WriteScenario(name, toml)));
  return collector.Collect();
}

class CollectorTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("GPUDOCTOR_FAKE_NOW", "10m", 1); }
  void TearDown() override { unsetenv("GPUDOCTOR_FAKE_NOW"); }
};

// gpudoctor-probe is found beside gpudoctor; where it is missing, gpudoctor
// re-executes itself as the probe (`gpudoctor __probe`), with the same result.
TEST_F(CollectorTest, TheProbeProgramBesideGpudoctorAndGpudoctorItselfServeTheSameSnapshot) {
  EXPECT_EQ(ProbeExecutableBeside(kBin + "gpudoctor"), kBin + "gpudoctor-probe");
  EXPECT_EQ(ProbeExecutableBeside("/nonexistent/gpudoctor"), "/nonexistent/gpudoctor");
  EXPECT_EQ(ProbeExecutableBeside("gpudoctor"), "gpudoctor");

  NvmlCollector probe(Options("healthy-8xh100.toml"));
  CollectorOptions self_options = Options("healthy-8xh100.toml");
  self_options.probe_executable = kBin + "gpudoctor";
  NvmlCollector self(self_options);
  Snapshot a = probe.Collect(), b = self.Collect();
  ASSERT_EQ(a.gpus.size(), 8u);
  ASSERT_EQ(b.gpus.size(), a.gpus.size());
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    EXPECT_EQ(a.gpus[i].uuid.value_or(""), b.gpus[i].uuid.value_or(""));
    EXPECT_EQ(a.gpus[i].temperature_c.value_or(0), b.gpus[i].temperature_c.value_or(0));
  }
}

TEST_F(CollectorTest, HealthyServerGivesEveryFieldOfEveryGpu) {
  NvmlCollector collector(Options("healthy-8xh100.toml"));
  Snapshot s = collector.Collect();
  EXPECT_EQ(s.driver_error, AccessError::kNone) << s.driver_message;
  EXPECT_EQ(s.driver_version.value_or(""), "550.54.15");
  EXPECT_EQ(s.cuda_driver_version.value_or(0), 12040);
  ASSERT_EQ(s.gpus.size(), 8u);
  EXPECT_TRUE(s.hangs.empty());
  for (const auto& gpu : s.gpus) {
    EXPECT_EQ(gpu.access_error, AccessError::kNone);
    EXPECT_TRUE(gpu.name.has_value());
    EXPECT_TRUE(gpu.uuid.has_value());
    ASSERT_TRUE(gpu.pci_bus_id.has_value());
    EXPECT_EQ(gpu.pci_bus_id.value().size(), 12u);
    EXPECT_TRUE(gpu.temperature_c.has_value());
    EXPECT_TRUE(gpu.power_draw_w.has_value());
    EXPECT_TRUE(gpu.memory_total_bytes.has_value());
    EXPECT_TRUE(gpu.ecc_volatile_uncorrected.has_value());
    EXPECT_TRUE(gpu.remapped_rows_pending.has_value());
    ASSERT_TRUE(gpu.processes.has_value());
    EXPECT_FALSE(gpu.processes.value().empty());
    EXPECT_FALSE(gpu.processes.value()[0].name.empty());
  }
}

TEST_F(CollectorTest, TheProbeServesManyRequests) {
  NvmlCollector collector(Options("healthy-8xh100.toml"));
  for (int i = 0; i < 5; ++i) {
    Snapshot s = collector.Collect();
    ASSERT_EQ(s.gpus.size(), 8u) << s.driver_message;
  }
}

TEST_F(CollectorTest, CollectIntoReplacesEverythingTheSnapshotHeld) {
  NvmlCollector collector(Options("healthy-8xh100.toml"));
  const Snapshot expected = collector.Collect();  // the fake's clock stands still: every reading repeats
  ASSERT_EQ(expected.gpus.size(), 8u) << expected.driver_message;

  // A snapshot full of something else: more GPUs than there are, a lost
  // one, lists and error text everywhere, a hang, an Xid, a driver error.
  Snapshot reused;
  for (uint32_t i = 0; i < 12; ++i) {
    GpuSnapshot& gpu = reused.gpus.emplace_back();
    gpu.index = 11 - i;
    gpu.MarkUnreadable(AccessError::kGpuLost, "GPU is lost, number " + std::to_string(i));
    gpu.fan_speeds_percent = Field<std::vector<uint32_t>>::Value({1, 2, 3, 4, 5, 6, 7, 8, 9});
    gpu.serial = Field<std::string>::Value(std::string(100, 's'));
  }
  reused.gpus[2] = expected.gpus[5];
  reused.hangs.push_back({3, "0000:61:00.0", "nvmlDeviceGetTemperature", std::chrono::seconds(10), true});
  reused.xid_events.push_back({1, 79, WallTime{}});
  reused.driver_error = AccessError::kHang;
  reused.driver_message = "stuck";
  collector.CollectInto(reused);
  EXPECT_TRUE(reused.gpus == expected.gpus);
  EXPECT_TRUE(reused.hangs.empty());
  EXPECT_TRUE(reused.xid_events.empty());
  EXPECT_EQ(reused.driver_error, AccessError::kNone);
  EXPECT_EQ(reused.driver_message, "");
  EXPECT_EQ(reused.driver_version, expected.driver_version);

  // Refilled again, the GPUs keep their memory: a UUID (longer than a
  // string holds in place) stays where it was.
  const char* uuid = reused.gpus[3].uuid.value().data();
  collector.CollectInto(reused);
  EXPECT_TRUE(reused.gpus == expected.gpus);
  EXPECT_EQ(reused.gpus[3].uuid.value().data(), uuid);

  Snapshot fewer;  // fewer GPUs than there are: the rest are added
  fewer.gpus.resize(3);
  collector.CollectInto(fewer);
  EXPECT_TRUE(fewer.gpus == expected.gpus);
}

TEST_F(CollectorTest, ABusyGpusProcessesAreAllListedAndAnIdleOnesListIsEmpty) {
  // The probe asks with room for a few dozen processes first; GPU 0 runs
  // more than that, GPU 1 none, GPU 2 exactly one.
  std::string scenario = "gpu_count = 3\n[gpu.0]\nprocesses = [\n";
  for (int pid = 1000; pid < 1050; ++pid)
    scenario += "  { pid = " + std::to_string(pid) + ", name = \"worker-" + std::to_string(pid) +
                "\", used_memory_mib = " + std::to_string(pid - 999) + " },\n";
  scenario += "]\n[gpu.1]\nprocesses = []\n[gpu.2]\nprocesses = [{ pid = 7, name = \"python3\", used_memory_mib = 64 }]\n";
  NvmlCollector collector(Options(WriteScenario("many-processes.toml", scenario)));
  for (int round = 0; round < 2; ++round) {  // the second from memory the probe keeps
    Snapshot s = collector.Collect();
    ASSERT_EQ(s.gpus.size(), 3u) << s.driver_message;
    ASSERT_TRUE(s.gpus[0].processes.has_value());
    const auto& busy = s.gpus[0].processes.value();
    ASSERT_EQ(busy.size(), 50u);
    EXPECT_EQ(busy[49].pid, 1049u);
    EXPECT_EQ(busy[49].name, "worker-1049");
    EXPECT_EQ(busy[49].used_memory_bytes.value_or(0), uint64_t{50} << 20);
    ASSERT_TRUE(s.gpus[1].processes.has_value());
    EXPECT_TRUE(s.gpus[1].processes.value().empty());
    ASSERT_TRUE(s.gpus[2].processes.has_value());
    ASSERT_EQ(s.gpus[2].processes.value().size(), 1u);
    EXPECT_EQ(s.gpus[2].processes.value()[0].name, "python3");
  }
}

TEST_F(CollectorTest, NvLinkCountersThatFailAreErrorsAndALostGpuStopsAtTheFirst) {
  // GPU 1's counters all fail; GPU 2 falls off the bus at its first one.
  const Snapshot s = CollectScenario("nvlink-counter-errors.toml", R"(
gpu_count = 3
[[call_error]]
call = "nvmlDeviceGetNvLinkErrorCounter"
gpu = 1
error = "unknown"
[[call_error]]
call = "nvmlDeviceGetNvLinkErrorCounter"
gpu = 2
error = "gpu_is_lost"
)");
  ASSERT_EQ(s.gpus.size(), 3u) << s.driver_message;
  ASSERT_TRUE(s.gpus[0].nvlinks.has_value());
  const size_t links = s.gpus[0].nvlinks.value().size();
  ASSERT_GT(links, 0u);
  for (const NvLinkInfo& link : s.gpus[0].nvlinks.value()) EXPECT_TRUE(link.crc_data_errors.has_value());

  // GPU 1: every link is listed with its state, and each counter is an error, never 0.
  ASSERT_TRUE(s.gpus[1].nvlinks.has_value());
  ASSERT_EQ(s.gpus[1].nvlinks.value().size(), links);
  for (const NvLinkInfo& link : s.gpus[1].nvlinks.value()) {
    EXPECT_TRUE(link.active.has_value());
    auto failed = [](const char* name, const auto& field) {
      if (std::string_view(name) != "active") {
        EXPECT_TRUE(field.failed()) << name;
      }
    };
    VisitNvLinkFields(failed, link);
  }
  EXPECT_EQ(s.gpus[1].access_error, AccessError::kNone);

  // GPU 2: lost at its first counter; that link's counters all say so, and no later link is read.
  EXPECT_EQ(s.gpus[2].access_error, AccessError::kGpuLost);
  ASSERT_TRUE(s.gpus[2].nvlinks.has_value());
  ASSERT_EQ(s.gpus[2].nvlinks.value().size(), 1u);
  const NvLinkInfo& first = s.gpus[2].nvlinks.value()[0];
  EXPECT_TRUE(first.active.has_value());
  for (const Field<uint64_t>* counter :
       {&first.replay_errors, &first.recovery_errors, &first.crc_flit_errors, &first.crc_data_errors}) {
    ASSERT_TRUE(counter->failed());
    EXPECT_EQ(counter->error(), s.gpus[2].access_message);
  }
}

TEST_F(CollectorTest, UnsupportedFieldsAreNotSupportedNotZero) {
  const Snapshot s = CollectScenario("unsupported.toml", R"(
gpu_count = 2
[defaults]
not_supported = ["fan_speeds_percent", "memory_temperature_c", "power_draw_w"]
)");
  ASSERT_EQ(s.gpus.size(), 2u) << s.driver_message;
  EXPECT_TRUE(s.gpus[0].memory_temperature_c.not_supported());
  EXPECT_TRUE(s.gpus[0].power_draw_w.not_supported());
  EXPECT_TRUE(s.gpus[0].temperature_c.has_value());
}

// nvmlDeviceValidateInforom answers a corrupted infoROM with an error code,
// which the probe reads as the value false, not as a failed reading.
// GPM gives rates between two samples: the probe's first look at a GPU has
// none, every later one the scenario's values in the model's units. A GPU
// without GPM says so; one metric a GPU lacks is absent for it alone.
TEST_F(CollectorTest, GpmRatesComeFromTheSecondSampleOnInTheModelsUnits) {
  NvmlCollector collector(Options("hopper-gpm.toml"));
  Snapshot first = collector.Collect();
  ASSERT_EQ(first.gpus.size(), 8u);
  for (const GpuSnapshot& gpu : first.gpus) {
    EXPECT_TRUE(gpu.gpm_supported.value_or(false)) << gpu.index;
    EXPECT_TRUE(gpu.gpm_sm_active.not_supported()) << gpu.index;
    EXPECT_NE(GpuNotes(gpu).at(0).find("first"), std::string::npos) << gpu.index;
  }
  std::this_thread::sleep_for(milliseconds(150));  // GPM's samples are at least 100 ms apart
  Snapshot second = collector.Collect();
  ASSERT_EQ(second.gpus.size(), 8u);
  const GpuSnapshot& one = second.gpus[1];
  EXPECT_DOUBLE_EQ(one.gpm_graphics_active.value(), 0.96);
  EXPECT_DOUBLE_EQ(one.gpm_sm_active.value(), 0.875);
  EXPECT_DOUBLE_EQ(one.gpm_sm_occupancy.value(), 0.41);
  EXPECT_DOUBLE_EQ(one.gpm_tensor_active.value(), 0.4925);
  EXPECT_DOUBLE_EQ(one.gpm_fp64_active.value(), 0.005);
  EXPECT_DOUBLE_EQ(one.gpm_fp32_active.value(), 0.18);
  EXPECT_DOUBLE_EQ(one.gpm_fp16_active.value(), 0.06);
  EXPECT_DOUBLE_EQ(one.gpm_dram_active.value(), 0.51);
  EXPECT_DOUBLE_EQ(one.gpm_pcie_tx_bytes_per_second.value(), 1210.0 * 1048576);
  EXPECT_DOUBLE_EQ(one.gpm_pcie_rx_bytes_per_second.value(), 2350.0 * 1048576);
  EXPECT_DOUBLE_EQ(one.gpm_nvlink_tx_bytes_per_second.value(), 61500.0 * 1048576);
  EXPECT_DOUBLE_EQ(one.gpm_nvlink_rx_bytes_per_second.value(), 60800.0 * 1048576);
  // The counter: both rates over the real time between the two samples, at least 150 ms.
  EXPECT_GE(one.gpm_nvlink_bytes_total.value(), 0.15 * (61500.0 + 60800.0) * 1048576);
  EXPECT_TRUE(GpuNotes(one).empty());
  EXPECT_TRUE(second.gpus[7].gpm_fp64_active.not_supported());
  EXPECT_DOUBLE_EQ(second.gpus[7].gpm_tensor_active.value(), 0.44);
  // The other new readings. GPUDOCTOR_FAKE_NOW is 10 minutes: 600 s at the base draw.
  EXPECT_EQ(second.gpus[2].total_energy_mj.value(), 598ULL * 1000 * 600);
  EXPECT_EQ(second.gpus[5].decoder_utilization_percent.value(), 11u);
  EXPECT_EQ(second.gpus[5].encoder_utilization_percent.value(), 0u);
  EXPECT_EQ(second.gpus[6].memory_reserved_bytes.value(), 600ULL << 20);
  EXPECT_EQ(second.gpus[6].memory_used_bytes.value(), 70112ULL << 20) << "used as the original call counts it";

  NvmlCollector without(Options("healthy-8xh100.toml"));
  without.Collect();
  std::this_thread::sleep_for(milliseconds(150));
  for (const GpuSnapshot& gpu : without.Collect().gpus) {
    EXPECT_FALSE(gpu.gpm_supported.value_or(true)) << gpu.index;
    EXPECT_TRUE(gpu.gpm_sm_active.not_supported() && gpu.gpm_nvlink_bytes_total.not_supported()) << gpu.index;
    ASSERT_EQ(GpuNotes(gpu).size(), 1u);
    EXPECT_NE(GpuNotes(gpu)[0].find("no GPU Performance Monitoring"), std::string::npos);
  }
}

TEST_F(CollectorTest, ACorruptedInforomIsReadAsInvalid) {
  const Snapshot s = CollectScenario("inforom.toml", R"(
gpu_count = 3
[gpu.1]
inforom_valid = false
[gpu.2]
not_supported = ["inforom_valid"]
)");
  ASSERT_EQ(s.gpus.size(), 3u) << s.driver_message;
  EXPECT_EQ(s.gpus[0].inforom_valid, Field<bool>::Value(true));
  EXPECT_EQ(s.gpus[1].inforom_valid, Field<bool>::Value(false));
  EXPECT_TRUE(s.gpus[2].inforom_valid.not_supported());
}

TEST_F(CollectorTest, DefaultPowerLimitIsReadInWattsNotSupportedOrFailed) {
  const Snapshot s = CollectScenario("default-power-limit.toml", R"(
gpu_count = 3
[defaults]
power_limit_w = 300
power_default_limit_w = 350
[gpu.1]
not_supported = ["power_default_limit_w"]
[[call_error]]
call = "nvmlDeviceGetPowerManagementDefaultLimit"
gpu = 2
error = "unknown"
)");
  ASSERT_EQ(s.gpus.size(), 3u) << s.driver_message;
  EXPECT_EQ(s.gpus[0].power_default_limit_w, Field<double>::Value(350.0));
  EXPECT_EQ(s.gpus[0].power_limit_w, Field<double>::Value(300.0));
  EXPECT_TRUE(s.gpus[1].power_default_limit_w.not_supported());
  ASSERT_TRUE(s.gpus[2].power_default_limit_w.failed());
  EXPECT_NE(s.gpus[2].power_default_limit_w.error().find("NVML_ERROR_UNKNOWN"), std::string::npos)
      << s.gpus[2].power_default_limit_w.error();
  EXPECT_TRUE(s.gpus[2].power_limit_w.has_value());  // one failed call spoils nothing else
}

TEST(SharedPciId, HoldsTheLastIdStoredAndNothingBeforeTheFirst) {
  CallTracker tracker{};
  EXPECT_EQ(tracker.gpu_pci[3].Load(), "");
  tracker.gpu_pci[3].Store("0000:c3:00.0");
  EXPECT_EQ(tracker.gpu_pci[3].Load(), "0000:c3:00.0");
  EXPECT_EQ(tracker.gpu_pci[4].Load(), "");
  tracker.gpu_pci[3].Store("00000000:1B:00.0");  // a longer one replaces it whole
  EXPECT_EQ(tracker.gpu_pci[3].Load(), "00000000:1B:00.0");
  tracker.gpu_pci[3].Store("0000:1b:00.0");  // and a shorter one leaves nothing of it behind
  EXPECT_EQ(tracker.gpu_pci[3].Load(), "0000:1b:00.0");
  const std::string long_id(40, 'f');  // over NVML's 32 bytes: cut, never overrun
  tracker.gpu_pci[3].Store(long_id);
  EXPECT_EQ(tracker.gpu_pci[3].Load(), long_id.substr(0, SharedPciId::kMaxLength - 1));
}

TEST_F(CollectorTest, HungGpuIsReportedWithItsCallAndTheOthersStillAnswer) {
  NvmlCollector collector(Options("nvml-hang.toml", milliseconds(1500)));
  auto start = steady_clock::now();
  Snapshot s = collector.Collect();
  auto took = steady_clock::now() - start;
  EXPECT_LT(took, seconds(4));
  ASSERT_EQ(s.hangs.size(), 1u);
  ASSERT_TRUE(s.hangs[0].gpu_index.has_value());
  EXPECT_EQ(*s.hangs[0].gpu_index, 5u);
  EXPECT_EQ(s.hangs[0].call, "nvmlDeviceGetTemperature");
  EXPECT_EQ(s.hangs[0].pci_bus_id, "0000:c3:00.0");  // read before the stuck call, through the shared tracker
  EXPECT_FALSE(s.hangs[0].still_stuck_from_earlier);
  ASSERT_EQ(s.gpus.size(), 8u);
  EXPECT_EQ(s.gpus[5].access_error, AccessError::kHang);
  EXPECT_TRUE(s.gpus[5].temperature_c.failed());
  for (uint32_t i : {0u, 1u, 2u, 3u, 4u, 6u, 7u}) EXPECT_TRUE(s.gpus[i].temperature_c.has_value()) << i;

  // The stuck probe is still alive: GPU 5 is not probed again, and the
  // next snapshot does not wait for it.
  start = steady_clock::now();
  Snapshot again = collector.Collect();
  EXPECT_LT(steady_clock::now() - start, milliseconds(1000));
  ASSERT_EQ(again.hangs.size(), 1u);
  EXPECT_TRUE(again.hangs[0].still_stuck_from_earlier);
  EXPECT_EQ(again.gpus.size(), 8u);
  EXPECT_TRUE(again.gpus[1].temperature_c.has_value());
}

TEST_F(CollectorTest, AGpuThatHangsBeforeItsPciReadIsNamedByTheIdReadEarlier) {
  // GPU 3 sticks in its very first call from scenario minute 20 (2 s of wall
  // time at this scale): the second request never reaches its PCI read, and
  // the id the probe stored in the shared tracker on the first still names it.
  unsetenv("GPUDOCTOR_FAKE_NOW");
  auto path = WriteScenario("later-hang.toml", R"(
gpu_count = 4
time_scale = 600
[[hang]]
call = "nvmlDeviceGetHandleByIndex"
gpu = 3
from = "20m"
duration = "forever"
)");
  NvmlCollector collector(Options(path, milliseconds(1500)));
  const auto start = steady_clock::now();
  Snapshot first = collector.Collect();
  ASSERT_EQ(first.gpus.size(), 4u) << first.driver_message;
  ASSERT_TRUE(first.hangs.empty()) << "the first request took over 2 s";
  std::this_thread::sleep_until(start + milliseconds(2500));
  Snapshot later = collector.Collect();
  ASSERT_EQ(later.hangs.size(), 1u) << later.driver_message;
  EXPECT_EQ(later.hangs[0].gpu_index, 3u);
  EXPECT_EQ(later.hangs[0].call.rfind("nvmlDeviceGetHandleByIndex", 0), 0u) << later.hangs[0].call;
  EXPECT_EQ(later.hangs[0].pci_bus_id, "0000:61:00.0");
}

TEST_F(CollectorTest, TwoStuckGpusAreBothNamedAndTheGpusAfterThemStillAnswer) {
  // GPUs are read in turn; GPU 1 sticks, so the GPUs after it are rescued onto
  // threads of their own, and GPU 5 sticking there holds nothing else.
  auto path = WriteScenario("two-hangs.toml", R"(
gpu_count = 8
[[hang]]
call = "nvmlDeviceGetPowerUsage"
gpu = 1
duration = "forever"
[[hang]]
call = "nvmlDeviceGetMemoryInfo"
gpu = 5
duration = "forever"
)");
  NvmlCollector collector(Options(path, milliseconds(1500)));
  Snapshot s = collector.Collect();
  ASSERT_EQ(s.hangs.size(), 2u) << s.driver_message;
  EXPECT_EQ(s.hangs[0].gpu_index, 1u);
  EXPECT_EQ(s.hangs[0].call, "nvmlDeviceGetPowerUsage");
  EXPECT_EQ(s.hangs[0].pci_bus_id, "0000:43:00.0");
  EXPECT_EQ(s.hangs[1].gpu_index, 5u);
  EXPECT_EQ(s.hangs[1].call, "nvmlDeviceGetMemoryInfo");
  EXPECT_EQ(s.hangs[1].pci_bus_id, "0000:c3:00.0");
  ASSERT_EQ(s.gpus.size(), 8u);
  for (uint32_t i : {0u, 2u, 3u, 4u, 6u, 7u}) EXPECT_TRUE(s.gpus[i].power_draw_w.has_value()) << i;
  EXPECT_EQ(s.gpus[1].access_error, AccessError::kHang);
  EXPECT_EQ(s.gpus[5].access_error, AccessError::kHang);
}

TEST_F(CollectorTest, ASlowStartDoesNotUseUpTheRescueOfAStuckGpu) {
  // The host calls take longer than the collector's patience, so a rescue is
  // asked for before any GPU is read and does nothing; GPU 2 then sticks,
  // and a second rescue still gets the GPUs after it read.
  auto path = WriteScenario("slow-start.toml", R"(
gpu_count = 6
[[hang]]
call = "nvmlDeviceGetCount_v2"
duration = "300ms"
[[hang]]
call = "nvmlDeviceGetTemperature"
gpu = 2
duration = "forever"
)");
  NvmlCollector collector(Options(path, milliseconds(2000)));
  Snapshot s = collector.Collect();
  ASSERT_EQ(s.hangs.size(), 1u) << s.driver_message;
  EXPECT_EQ(s.hangs[0].gpu_index, 2u);
  EXPECT_EQ(s.hangs[0].call, "nvmlDeviceGetTemperature");
  ASSERT_EQ(s.gpus.size(), 6u);
  for (uint32_t i : {0u, 1u, 3u, 4u, 5u}) EXPECT_TRUE(s.gpus[i].temperature_c.has_value()) << i;
}

TEST_F(CollectorTest, ASlowGpuIsWaitedForAndTheProbeServesOn) {
  // Slower than the collector's patience (a rescue) but within the deadline:
  // no hang, every GPU complete, and the same probe answers the next request.
  auto path = WriteScenario("slow.toml", R"(
gpu_count = 4
[[hang]]
call = "nvmlDeviceGetUUID"
gpu = 0
duration = "400ms"
)");
  NvmlCollector collector(Options(path, seconds(3)));
  Snapshot s = collector.Collect();
  EXPECT_TRUE(s.hangs.empty()) << s.hangs[0].call;
  EXPECT_EQ(s.driver_error, AccessError::kNone) << s.driver_message;
  ASSERT_EQ(s.gpus.size(), 4u);
  for (const auto& gpu : s.gpus) {
    EXPECT_EQ(gpu.access_error, AccessError::kNone) << gpu.index;
    EXPECT_TRUE(gpu.uuid.has_value()) << gpu.index;
  }
  Snapshot again = collector.Collect();
  EXPECT_TRUE(again.hangs.empty());
  EXPECT_EQ(again.gpus.size(), 4u);
}

TEST_F(CollectorTest, NvmlHangingAtStartIsAHostHangAndIsNotRetriedWhileStuck) {
  auto path = WriteScenario("init-hang.toml", R"(
gpu_count = 2
[[hang]]
call = "nvmlInit_v2"
duration = "forever"
)");
  NvmlCollector collector(Options(path, milliseconds(800)));
  Snapshot s = collector.Collect();
  EXPECT_EQ(s.driver_error, AccessError::kHang);
  ASSERT_EQ(s.hangs.size(), 1u);
  EXPECT_FALSE(s.hangs[0].gpu_index.has_value());
  EXPECT_EQ(s.hangs[0].call, "nvmlInit_v2");
  auto start = steady_clock::now();
  Snapshot again = collector.Collect();
  EXPECT_LT(steady_clock::now() - start, milliseconds(500));
  ASSERT_EQ(again.hangs.size(), 1u);
  EXPECT_TRUE(again.hangs[0].still_stuck_from_earlier);
}

TEST_F(CollectorTest, AProbeThatWasOnlySlowToStartIsNoLongerAHostHangOnceItMovesOn) {
  // NVML's start is slower than the deadline during the first two seconds only
  // (a loaded machine starting the probe), and GPU 1 then sticks for good. The
  // first look is a host hang; once that probe has got past NVML's start, the
  // host is not called hung again: GPU 1 is, once, however many probes hold it.
  // The deadline is 1.5 s: an instrumented probe among other tests on two CPUs
  // took up to half a second to answer, and a slower answer is a hang.
  unsetenv("GPUDOCTOR_FAKE_NOW");
  const auto start = steady_clock::now();
  const auto epoch_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  setenv("GPUDOCTOR_FAKE_EPOCH_MS", std::to_string(epoch_ms).c_str(), 1);  // one scenario clock for every probe
  struct Unset {
    ~Unset() { unsetenv("GPUDOCTOR_FAKE_EPOCH_MS"); }
  } unset;
  auto path = WriteScenario("slow-init-then-hang.toml", R"(
gpu_count = 3
[[hang]]
call = "nvmlInit_v2"
until = "2s"
duration = "2500ms"
[[hang]]
call = "nvmlDeviceGetTemperature"
gpu = 1
duration = "forever"
)");
  const milliseconds deadline(1500);
  NvmlCollector collector(Options(path, deadline));
  Snapshot first = collector.Collect();
  ASSERT_EQ(first.hangs.size(), 1u) << first.driver_message;
  EXPECT_FALSE(first.hangs[0].gpu_index.has_value());
  EXPECT_EQ(first.hangs[0].call, "nvmlInit_v2");

  // The first probe is past its start by now, stuck in GPU 1: it called NVML's start within the first two
  // seconds, which then took 2.5 s; a new probe, past the two seconds, starts at once.
  std::this_thread::sleep_until(start + milliseconds(5500));
  Snapshot second = collector.Collect();
  EXPECT_NE(second.driver_error, AccessError::kHang) << second.driver_message;
  ASSERT_EQ(second.hangs.size(), 1u) << second.driver_message;
  EXPECT_EQ(second.hangs[0].gpu_index, 1u);
  EXPECT_EQ(second.hangs[0].call, "nvmlDeviceGetTemperature");
  ASSERT_EQ(second.gpus.size(), 3u);
  for (uint32_t i : {0u, 2u}) EXPECT_TRUE(second.gpus[i].temperature_c.has_value()) << i;

  const auto third_start = steady_clock::now();
  Snapshot third = collector.Collect();
  EXPECT_LT(steady_clock::now() - third_start, deadline);  // GPU 1 is not asked again: no wait for it
  ASSERT_EQ(third.hangs.size(), 1u) << third.driver_message;
  EXPECT_EQ(third.hangs[0].gpu_index, 1u);
  EXPECT_TRUE(third.hangs[0].still_stuck_from_earlier);
  EXPECT_EQ(third.hangs[0].pci_bus_id, second.hangs[0].pci_bus_id);
  ASSERT_EQ(third.gpus.size(), 3u);
  for (uint32_t i : {0u, 2u}) EXPECT_TRUE(third.gpus[i].temperature_c.has_value()) << i;
}

TEST_F(CollectorTest, DriverLibraryMismatchAtInit) {
  NvmlCollector collector(Options("driver-mismatch.toml"));
  Snapshot s = collector.Collect();
  EXPECT_EQ(s.driver_error, AccessError::kVersionMismatch);
  EXPECT_NE(s.driver_message.find("mismatch"), std::string::npos) << s.driver_message;
  EXPECT_TRUE(s.gpus.empty());
}

TEST_F(CollectorTest, DriverNotLoaded) {
  NvmlCollector collector(Options("driver-not-loaded.toml"));
  Snapshot s = collector.Collect();
  EXPECT_EQ(s.driver_error, AccessError::kDriverNotLoaded);
}

TEST_F(CollectorTest, MissingLibraryIsLibraryNotFound) {
  CollectorOptions options = Options("healthy-8xh100.toml");
  options.library_path = "/nonexistent/libnvidia-ml.so.1";
  NvmlCollector collector(options);
  Snapshot s = collector.Collect();
  EXPECT_EQ(s.driver_error, AccessError::kLibraryNotFound);
  EXPECT_EQ(s.driver_message, "NVIDIA driver not found (/nonexistent/libnvidia-ml.so.1)");
}

TEST_F(CollectorTest, LostGpuFailsItsFieldsAndKeepsItsIdentity) {
  NvmlCollector collector(Options("gpu-fallen-off-bus.toml"));
  Snapshot s = collector.Collect();
  ASSERT_EQ(s.gpus.size(), 8u) << s.driver_message;
  const GpuSnapshot& lost = s.gpus[3];
  EXPECT_EQ(lost.access_error, AccessError::kGpuLost);
  EXPECT_TRUE(lost.temperature_c.failed());
  EXPECT_NE(lost.temperature_c.error().find("NVML_ERROR_GPU_IS_LOST"), std::string::npos);
  // Every field read after NVML said "lost" is an error saying so, lists included; none is left out.
  auto expect_lost = [&](const char* key, const auto& field) {
    EXPECT_TRUE(field.failed()) << key;
    EXPECT_EQ(field.error(), lost.access_message) << key;
  };
  VisitScalarGpuFields(expect_lost, lost);
  expect_lost("processes", lost.processes);
  expect_lost("nvlinks", lost.nvlinks);
  EXPECT_EQ(s.gpus[2].access_error, AccessError::kNone);
}

TEST_F(CollectorTest, LegacyLibraryIsReadThroughTheOldEntryPoints) {
  CollectorOptions options = Options("healthy-8xh100.toml");
  options.library_path = kBin + "libgpudoctor_fake_nvml_legacy.so";
  NvmlCollector collector(options);
  Snapshot s = collector.Collect();
  ASSERT_EQ(s.gpus.size(), 8u) << s.driver_message;
  EXPECT_TRUE(s.gpus[0].pci_bus_id.has_value());
  EXPECT_TRUE(s.gpus[0].processes.has_value());
  EXPECT_TRUE(s.gpus[0].clock_event_reasons.has_value());
}

TEST_F(CollectorTest, FabricRegistrationIsReadOnAnHgxBoard) {
  NvmlCollector collector(Options("hgx-fabric-fault.toml"));
  Snapshot s = collector.Collect();
  ASSERT_EQ(s.gpus.size(), 8u) << s.driver_message;
  const GpuSnapshot& healthy = s.gpus[0];
  EXPECT_EQ(healthy.fabric_state.value_or(""), "completed");
  EXPECT_EQ(healthy.fabric_status.value_or(""), "success");
  EXPECT_EQ(healthy.fabric_clique_id.value_or(0), 32766u);
  EXPECT_EQ(healthy.fabric_cluster_uuid.value_or(""), "5e9a7c1f0b2d4e8a9f3c6d1e2a4b8c70");
  EXPECT_EQ(healthy.fabric_health_mask.value_or(0), 0xaau);
  EXPECT_EQ(s.gpus[3].fabric_health_mask.value_or(0), 0x99u);
  EXPECT_NE(s.gpus[5].fabric_status.value_or("").find("NOT_READY"), std::string::npos);
}

TEST_F(CollectorTest, FabricStateOfTheOriginalCallHasNoHealthMask) {
  CollectorOptions options = Options("hgx-fabric-fault.toml");
  options.library_path = kBin + "libgpudoctor_fake_nvml_legacy.so";
  NvmlCollector collector(options);
  Snapshot s = collector.Collect();
  ASSERT_EQ(s.gpus.size(), 8u) << s.driver_message;
  EXPECT_EQ(s.gpus[0].fabric_state.value_or(""), "completed");
  EXPECT_TRUE(s.gpus[0].fabric_health_mask.not_supported());
}

TEST_F(CollectorTest, FabricFieldsOfAServerWithoutNvSwitchAreNotSupported) {
  NvmlCollector collector(Options("healthy-8xh100.toml"));
  Snapshot s = collector.Collect();
  ASSERT_FALSE(s.gpus.empty());
  EXPECT_TRUE(s.gpus[0].fabric_state.not_supported());
  EXPECT_TRUE(s.gpus[0].fabric_status.not_supported());
  EXPECT_TRUE(s.gpus[0].fabric_health_mask.not_supported());
}

TEST_F(CollectorTest, XidEventsArriveThroughTheEventApi) {
  CollectorOptions options = Options("ecc-dbe-row-remap.toml");
  options.event_window = milliseconds(200);
  NvmlCollector collector(options);
  Snapshot s = collector.Collect();
  bool found = false;
  for (const auto& x : s.xid_events) found |= x.gpu_index == 6 && x.xid == 48;
  EXPECT_TRUE(found);
  // Delivered once: the probe keeps its event set between requests.
  Snapshot again = collector.Collect();
  for (const auto& x : again.xid_events) EXPECT_FALSE(x.gpu_index == 6 && x.xid == 48);
}

TEST_F(CollectorTest, AProbeThatCannotStartIsAClearErrorNotAHang) {
  CollectorOptions options = Options("healthy-8xh100.toml");
  options.probe_executable = "/nonexistent/gpudoctor";
  NvmlCollector collector(options);
  Snapshot s = collector.Collect();
  EXPECT_NE(s.driver_error, AccessError::kNone);
  EXPECT_FALSE(s.driver_message.empty());
}

TEST_F(CollectorTest, AProbeThatExitsAtOnceIsAClearErrorNotAHang) {
  CollectorOptions options = Options("healthy-8xh100.toml", seconds(5));
  options.probe_executable = "/bin/true";
  NvmlCollector collector(options);
  auto start = steady_clock::now();
  Snapshot s = collector.Collect();
  EXPECT_LT(steady_clock::now() - start, seconds(2));
  EXPECT_EQ(s.driver_error, AccessError::kOther);
  EXPECT_NE(s.driver_message.find("exited"), std::string::npos) << s.driver_message;
}

TEST_F(CollectorTest, AnImpossibleGpuCountIsAnErrorNotAnEndlessWait) {
  // A probe (here a script) that claims 4,294,967,295 GPUs and then goes
  // quiet: the collector must neither wait for nor list that many.
  const std::string script = WriteScenario("liar-probe.sh",
                                           "#!/bin/sh\n"
                                           "printf '\\011\\000\\000\\000\\002\\000\\000\\000\\001"
                                           "\\377\\377\\377\\377'\n"
                                           "exec sleep 30\n");
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  CollectorOptions options = Options("healthy-8xh100.toml", milliseconds(800));
  options.probe_executable = script;
  NvmlCollector collector(options);
  const auto start = steady_clock::now();
  Snapshot s = collector.Collect();
  EXPECT_LT(steady_clock::now() - start, seconds(3));
  ASSERT_TRUE(s.device_count.failed());
  EXPECT_NE(s.device_count.error().find("4294967295 GPUs"), std::string::npos) << s.device_count.error();
  EXPECT_TRUE(s.gpus.empty());
  EXPECT_TRUE(s.hangs.empty());
}

TEST_F(CollectorTest, ParentsWithLowDescriptorsFreeStillHandTheProbeTheRightOnes) {
  // A daemon may run with stdin and other low descriptors closed; the
  // collector's pipes and tracker would then land on 0-4, where the spawn's
  // own dup2 calls could overwrite them. The child below frees 0, 3 and 4 and
  // checks that the hang is still named, which needs the tracker on fd 3.
  CollectorOptions options = Options("nvml-hang.toml", seconds(3));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(0);
    close(3);
    close(4);
    NvmlCollector collector(options);
    Snapshot s = collector.Collect();
    const bool named = s.hangs.size() == 1 && s.hangs[0].call == "nvmlDeviceGetTemperature" && s.gpus.size() == 8 &&
                       s.gpus[7].temperature_c.has_value();
    if (!named) {
      std::fprintf(stderr, "child: %zu hangs (first in \"%s\"), %zu GPUs, driver: %s\n", s.hangs.size(),
                   s.hangs.empty() ? "" : s.hangs[0].call.c_str(), s.gpus.size(), s.driver_message.c_str());
    }
    _exit(named ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST_F(CollectorTest, ABrokenScenarioIsReportedWithTheLibrarysMessage) {
  auto path = WriteScenario("broken.toml", "gpu_count = [\n");
  NvmlCollector collector(Options(path));
  Snapshot s = collector.Collect();
  EXPECT_NE(s.driver_error, AccessError::kNone);
  EXPECT_NE(s.driver_message.find("broken.toml"), std::string::npos) << s.driver_message;
}

}  // namespace
}  // namespace gpudoctor
