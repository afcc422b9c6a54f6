#include "scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "model/snapshot.h"

namespace gpudoctor::fake_nvml {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

Scenario Parse(std::string_view text) {
  auto scenario = ParseScenario(text, "test.toml");
  EXPECT_TRUE(scenario.ok()) << scenario.error().message;
  return scenario.ok() ? std::move(*scenario) : Scenario{};
}

std::string ParseError(std::string_view text) {
  auto scenario = ParseScenario(text, "test.toml");
  EXPECT_FALSE(scenario.ok());
  return scenario.ok() ? "" : scenario.error().message;
}

TEST(ParseScenario, EmptyFileIsAHealthyEightGpuH100Server) {
  Scenario scenario = Parse("");
  EXPECT_EQ(scenario.driver_version, "550.54.15");
  EXPECT_EQ(scenario.cuda_driver_version, 12040);
  ASSERT_EQ(scenario.gpus.size(), 8u);
  std::set<std::string> uuids, serials, buses;
  for (const GpuSpec& gpu : scenario.gpus) {
    EXPECT_EQ(gpu.Text(GpuField::kName), "NVIDIA H100 80GB HBM3");
    EXPECT_THAT(gpu.Text(GpuField::kUuid), StartsWith("GPU-"));
    EXPECT_EQ(gpu.Text(GpuField::kUuid).size(), 40u);
    uuids.insert(gpu.Text(GpuField::kUuid));
    serials.insert(gpu.Text(GpuField::kSerial));
    buses.insert(gpu.Text(GpuField::kPciBusId));
    EXPECT_EQ(gpu.Number(GpuField::kMemoryTotalMib, 0), 81559);
    EXPECT_EQ(gpu.Number(GpuField::kMemoryUsedMib, 0), 0);
    EXPECT_EQ(gpu.Number(GpuField::kClockEventReasons, 0), clock_event::kGpuIdle);
    EXPECT_EQ(gpu.nvlinks.size(), 18u);
    EXPECT_TRUE(gpu.fan_speeds_percent.empty());
    EXPECT_FALSE(gpu.Supported(GpuField::kRetiredPagesDbe));
    EXPECT_TRUE(gpu.Supported(GpuField::kRemappedRowsPending));
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(serials.size(), 8u);
  EXPECT_EQ(buses.size(), 8u);
  EXPECT_EQ(scenario.gpus[0].Text(GpuField::kPciBusId), "0000:1b:00.0");
}

TEST(ParseScenario, DefaultsApplyToEveryGpuAndGpuTablesOverrideThem) {
  Scenario scenario = Parse(R"(
gpu_count = 4
[defaults]
temperature_c = 60
fan_speeds_percent = [40, 45]
not_supported = ["memory_temperature_c"]
[gpu.2]
temperature_c = 81
pci_bus_id = "00000000:C3:00.0"
not_supported = []
nvlink_count = 4
[[gpu.2.nvlink]]
link = 3
active = false
crc_flit_errors = 12
)");
  ASSERT_EQ(scenario.gpus.size(), 4u);
  EXPECT_EQ(scenario.gpus[1].Number(GpuField::kTemperatureC, 0), 60);
  EXPECT_EQ(scenario.gpus[2].Number(GpuField::kTemperatureC, 0), 81);
  EXPECT_EQ(scenario.gpus[2].fan_speeds_percent.size(), 2u);
  EXPECT_FALSE(scenario.gpus[1].Supported(GpuField::kMemoryTemperatureC));
  EXPECT_TRUE(scenario.gpus[2].Supported(GpuField::kMemoryTemperatureC));
  EXPECT_TRUE(scenario.gpus[2].Supported(GpuField::kRetiredPagesSbe));  // the list replaces the built-in one
  EXPECT_EQ(scenario.gpus[2].Text(GpuField::kPciBusId), "0000:c3:00.0");
  ASSERT_EQ(scenario.gpus[2].nvlinks.size(), 4u);
  EXPECT_EQ(scenario.gpus[2].nvlinks[3].active.At(0), 0);
  EXPECT_EQ(scenario.gpus[2].nvlinks[3].errors[NVML_NVLINK_ERROR_DL_CRC_FLIT].At(0), 12);
}

TEST(ParseScenario, JitterIsPerGpuAndStaysInRange) {
  Scenario scenario = Parse(R"(
gpu_count = 2
[defaults]
utilization_gpu_percent = 99
jitter = { utilization_gpu_percent = 5, power_draw_w = 20 }
[gpu.1]
jitter = {}
)");
  bool differs = false;
  for (double t = 0; t < 300; t += 1.5) {
    double utilization = scenario.gpus[0].Number(GpuField::kUtilizationGpuPercent, t);
    EXPECT_LE(utilization, 100);
    EXPECT_GE(utilization, 94);
    EXPECT_EQ(scenario.gpus[1].Number(GpuField::kUtilizationGpuPercent, t), 99);
    differs |= utilization != scenario.gpus[0].Number(GpuField::kUtilizationGpuPercent, 0);
  }
  EXPECT_TRUE(differs);
}

TEST(ParseScenario, MemoryUsedFollowsRunningProcessesUnlessGiven) {
  Scenario scenario = Parse(R"(
gpu_count = 2
[defaults]
processes = [
  { pid = 100, name = "train.py", used_memory_mib = 1000 },
  { pid = 200, name = "eval.py", used_memory_mib = 500, start = "1m", stop = "2m" },
]
[gpu.1]
memory_used_mib = 7
)");
  EXPECT_EQ(scenario.gpus[0].Number(GpuField::kMemoryUsedMib, 0), 1000);
  EXPECT_EQ(scenario.gpus[0].Number(GpuField::kMemoryUsedMib, 90), 1500);
  EXPECT_EQ(scenario.gpus[0].Number(GpuField::kMemoryUsedMib, 120), 1000);
  EXPECT_EQ(scenario.gpus[1].Number(GpuField::kMemoryUsedMib, 90), 7);
}

TEST(ParseScenario, TimelineSetsRampsAndRaisesFields) {
  Scenario scenario = Parse(R"(
gpu_count = 2
[defaults]
fan_speeds_percent = [30, 30]
processes = [{ pid = 7, name = "python3", used_memory_mib = 100 }]

[[timeline]]
at = "1m"
gpu = 1
field = "temperature_c"
to = 94
over = "10m"

[[timeline]]
at = "2m"
field = "clock_event_reasons"
set = ["sw_thermal_slowdown", "hw_thermal_slowdown"]

[[timeline]]
at = 0
gpus = [0]
field = "ecc_volatile_corrected"
rate = 6
per = "1m"

[[timeline]]
at = "30s"
gpu = 0
field = "fan_speeds_percent"
fan = 1
set = 0

[[timeline]]
at = "1m"
gpu = 0
field = "processes.used_memory_mib"
pid = 7
rate = 10

[[timeline]]
at = "1m"
gpu = 1
field = "nvlink.replay_errors"
link = 2
rate = 1
)");
  const GpuSpec& gpu0 = scenario.gpus[0];
  const GpuSpec& gpu1 = scenario.gpus[1];
  EXPECT_EQ(gpu1.Number(GpuField::kTemperatureC, 60), 34);
  EXPECT_DOUBLE_EQ(gpu1.Number(GpuField::kTemperatureC, 360), 64);
  EXPECT_EQ(gpu0.Number(GpuField::kTemperatureC, 360), 34);
  EXPECT_EQ(gpu1.Number(GpuField::kClockEventReasons, 119), clock_event::kGpuIdle);
  EXPECT_EQ(gpu1.Number(GpuField::kClockEventReasons, 120),
            clock_event::kSwThermalSlowdown | clock_event::kHwThermalSlowdown);
  EXPECT_EQ(gpu0.Number(GpuField::kEccVolatileCorrected, 600), 60);
  EXPECT_EQ(gpu1.Number(GpuField::kEccVolatileCorrected, 600), 0);
  EXPECT_EQ(gpu0.fan_speeds_percent[0].At(60), 30);
  EXPECT_EQ(gpu0.fan_speeds_percent[1].At(60), 0);
  EXPECT_EQ(gpu0.Number(GpuField::kMemoryUsedMib, 70), 200);
  EXPECT_EQ(gpu1.nvlinks[2].errors[NVML_NVLINK_ERROR_DL_REPLAY].At(70), 10);
  EXPECT_EQ(gpu1.nvlinks[3].errors[NVML_NVLINK_ERROR_DL_REPLAY].At(70), 0);
}

TEST(ParseScenario, FaultsAndEvents) {
  Scenario scenario = Parse(R"(
xid_lookback = "5m"
[[gpu_lost]]
gpu = 3
at = "2m"
[[hang]]
call = "nvmlDeviceGetTemperature"
gpu = 5
[[hang]]
call = "*"
from = "1m"
until = "2m"
duration = "3s"
[[call_error]]
call = "nvmlDeviceGetCount"
error = "NVML_ERROR_UNKNOWN"
[[init_failure]]
error = "driver_not_loaded"
from = "10m"
until = "12m"
[[xid]]
gpu = 3
at = "2m"
xid = 79
[[xid]]
gpu = 1
at = "1m"
xid = 48
)");
  EXPECT_EQ(scenario.gpus[3].lost_at, 120);
  EXPECT_FALSE(scenario.gpus[2].LostAt(1e9));
  ASSERT_EQ(scenario.hangs.size(), 2u);
  EXPECT_EQ(scenario.hangs[0].gpu, 5u);
  EXPECT_FALSE(scenario.hangs[0].seconds.has_value());
  EXPECT_TRUE(scenario.hangs[1].calls.all());
  EXPECT_EQ(scenario.hangs[1].seconds, 3.0);
  EXPECT_TRUE(scenario.hangs[1].window.Contains(60));
  EXPECT_FALSE(scenario.hangs[1].window.Contains(120));
  ASSERT_EQ(scenario.call_errors.size(), 1u);
  EXPECT_TRUE(scenario.call_errors[0].calls.test(Index(NvmlCall::nvmlDeviceGetCount)));
  EXPECT_TRUE(scenario.call_errors[0].calls.test(Index(NvmlCall::nvmlDeviceGetCount_v2)));
  EXPECT_EQ(scenario.call_errors[0].error, NVML_ERROR_UNKNOWN);
  ASSERT_EQ(scenario.init_failures.size(), 1u);
  EXPECT_EQ(scenario.init_failures[0].error, NVML_ERROR_DRIVER_NOT_LOADED);
  EXPECT_EQ(scenario.xid_lookback, 300);
  ASSERT_EQ(scenario.xids.size(), 2u);
  EXPECT_EQ(scenario.xids[0].xid, 48u);  // sorted by time
}

struct BadScenario {
  const char* text;
  const char* error;  // expected "scenario test.toml: <line>: <message>" fragment
};

// Names each case by its expected message, with quotes that test runners accept.
void PrintTo(const BadScenario& bad, std::ostream* out) {
  for (const char* c = bad.error; *c != '\0'; ++c) *out << (*c == '"' ? '\'' : *c);
}

class ParseScenarioRejects : public ::testing::TestWithParam<BadScenario> {};

TEST_P(ParseScenarioRejects, WithLineAndReason) {
  std::string error = ParseError(GetParam().text);
  EXPECT_THAT(error, StartsWith("scenario test.toml: "));
  EXPECT_THAT(error, HasSubstr(GetParam().error));
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, ParseScenarioRejects,
    ::testing::Values(
        BadScenario{"gpu_count = 2\ntemprature = 3\n", ": 2: unknown key \"temprature\" in the scenario"},
        BadScenario{"[defaults]\ntemprature_c = 3\n", ": 2: unknown key \"temprature_c\" in [defaults]"},
        BadScenario{"[gpu.1]\n\nfan_speed = [1]\n", ": 3: unknown key \"fan_speed\" in a [gpu.N] table"},
        BadScenario{"gpu_count = [\n", ": 1: "},
        BadScenario{"gpu_count = 2\n[gpu.2]\nname = \"x\"\n", "[gpu.2]: gpu_count is 2"},
        BadScenario{"[gpu.first]\n", "GPU tables are named by index"},
        BadScenario{"[defaults]\nuuid = \"GPU-1\"\n", ": 2: \"uuid\" must differ between GPUs"},
        BadScenario{"[gpu.1]\nserial = \"1654922013100\"\n", "gpu 0 and gpu 1 have the same serial"},
        BadScenario{"[gpu.1]\npci_bus_id = \"nope\"\n", "\"nope\" is not a PCI bus id"},
        BadScenario{"[defaults]\ntemperature_c = -4\n", "temperature_c must not be negative"},
        BadScenario{"[defaults]\nutilization_gpu_percent = 101\n", "must be at most 100"},
        BadScenario{"[defaults]\ntemperature_c = \"hot\"\n", "temperature_c must be a number"},
        BadScenario{"[defaults]\nclock_event_reasons = [\"too_hot\"]\n", "\"too_hot\" is not a clock event reason"},
        BadScenario{"[defaults]\nnot_supported = [\"fan_speed\"]\n",
                    "\"fan_speed\" in not_supported is not a GPU field"},
        BadScenario{"[defaults]\nprocesses = [{ pid = 1, name = \"a\" }]\n", "a process needs \"used_memory_mib\""},
        BadScenario{"[defaults]\nnvlink_count = 2\n[[defaults.nvlink]]\nlink = 5\n", "link 5 is beyond nvlink_count"},
        BadScenario{"[[timeline]]\nat = \"1m\"\nfield = \"temperature_c\"\n", "exactly one of set, to"},
        BadScenario{"[[timeline]]\nat = \"1m\"\nfield = \"temperature_c\"\nto = 90\n", "needs over"},
        BadScenario{"[[timeline]]\nat = \"soon\"\nfield = \"temperature_c\"\nset = 90\n",
                    ": 2: at: \"soon\" is not a duration"},
        BadScenario{"[[timeline]]\nat = 0\nfield = \"name\"\nset = 1\n", "\"name\" is fixed for the whole scenario"},
        BadScenario{"[[timeline]]\nat = 0\nfield = \"ecc_enabled\"\nto = 1\nover = 5\n", "can only change with set"},
        BadScenario{"[[timeline]]\nat = 0\nfield = \"memory_used_mib\"\nset = 1\n",
                    "derives memory_used_mib from its processes"},
        BadScenario{"[[timeline]]\nat = 0\nfield = \"processes.used_memory_mib\"\npid = 9\nset = 1\n",
                    "has no process with pid 9"},
        BadScenario{"[[timeline]]\nat = 0\nfield = \"nvlink.crc_errors\"\nset = 1\n", "is not an nvlink field"},
        BadScenario{"[[timeline]]\nat = 0\nfield = \"temperature_c\"\nset = 1\ngpu = 8\n", "gpu 8 does not exist"},
        BadScenario{"[[timeline]]\nat = 0\nfield = \"temperature_c\"\nset = 1\nwhen = 3\n", "unknown key \"when\""},
        BadScenario{"[[hang]]\ncall = \"nvmlDeviceGetTemprature\"\n", "is not an NVML function"},
        BadScenario{"[[hang]]\ncall = \"nvmlInit\"\ngpu = 1\n", "does not act on one GPU"},
        BadScenario{"[[hang]]\ncall = \"*\"\nfrom = \"2m\"\nuntil = \"1m\"\n", "until must be later than from"},
        BadScenario{"[[call_error]]\ncall = \"nvmlShutdown\"\nerror = \"gpu_fell_off\"\n",
                    "is not an NVML return code"},
        BadScenario{"[[init_failure]]\nerror = \"success\"\n", "needs an error, not success"},
        BadScenario{"[[xid]]\ngpu = 0\nxid = 79\n", "needs \"at\""},
        BadScenario{"[defaults]\njitter = { memory_used_mib = 3 }\n",
                    "\"memory_used_mib\" is not a number field that can jitter"},
        BadScenario{"[defaults]\njitter = { ecc_enabled = 1 }\n",
                    "\"ecc_enabled\" is not a number field that can jitter"},
        BadScenario{"hang = 3\n", "hang must be written as [[hang]] tables"},
        BadScenario{"time_scale = 0\n", "time_scale must be greater than zero"}));

TEST(ClockEventReasonBit, UsesTheSnapshotModelsNames) {
  EXPECT_EQ(ClockEventReasonBit("hw_thermal_slowdown"), clock_event::kHwThermalSlowdown);
  EXPECT_EQ(ClockEventReasonBit("sw_power_cap"), clock_event::kSwPowerCap);
  EXPECT_EQ(ClockEventReasonBit("other"), std::nullopt);
  EXPECT_EQ(ClockEventReasonBit("thermal"), std::nullopt);
}

TEST(MatchCalls, NamesWithoutVersionCoverTheirVersions) {
  auto init = MatchCalls("nvmlInit");
  ASSERT_TRUE(init.has_value());
  EXPECT_EQ(init->count(), 2u);
  auto init_v2 = MatchCalls("nvmlInit_v2");
  ASSERT_TRUE(init_v2.has_value());
  EXPECT_EQ(init_v2->count(), 1u);
  EXPECT_EQ(MatchCalls("nvmlDeviceGetPciInfo")->count(), 3u);
  EXPECT_EQ(MatchCalls("*")->count(), kNvmlCallCount);
  EXPECT_FALSE(MatchCalls("nvmlDeviceGetPci").has_value());
  EXPECT_TRUE(IsDeviceCall(NvmlCall::nvmlDeviceGetTemperature));
  EXPECT_TRUE(IsDeviceCall(NvmlCall::nvmlDeviceGetHandleByIndex_v2));
  EXPECT_FALSE(IsDeviceCall(NvmlCall::nvmlDeviceGetCount_v2));
  EXPECT_FALSE(IsDeviceCall(NvmlCall::nvmlEventSetWait_v2));
}

}  // namespace
}  // namespace gpudoctor::fake_nvml
