// Rules judged from the snapshot: driver, thermal, power, memory, links.
#include <gtest/gtest.h>

#include <set>

#include "health/checklist.h"
#include "health/health_test_support.h"
#include "health/rule_ids.h"

namespace gpudoctor {
namespace {

using namespace testing_support;
using std::chrono::minutes;

std::vector<Finding> EvaluateWith(const HealthConfig& config, const Snapshot* snapshot,
                                  const HostSignals* host = nullptr) {
  HealthInput input;
  input.snapshot = snapshot;
  input.host = host;
  input.now = kNow;
  return EvaluateRules(input, config);
}

TEST(HealthyServer, EveryRuleReportsOkAndNothingElse) {
  Snapshot snapshot = HealthySnapshot(2);
  for (GpuSnapshot& gpu : snapshot.gpus) {  // on an NVSwitch board, registered with the fabric
    gpu.fabric_state.SetValue("completed");
    gpu.fabric_status.SetValue("success");
    gpu.fabric_health_mask.SetValue(0xaa);
  }
  HostSignals host = HealthyHost(2);
  host.nvidia_driver_built_at = Field<WallTime>::Value(kNow - std::chrono::days(30));
  std::vector<LogEvent> no_events;
  HealthConfig config = ConfigWith(R"(
    [rules.cuda_incompatible]
    required = "12.4"
    [rules.gpu_count_mismatch]
    expected = 2
  )");
  HealthInput input;
  input.snapshot = &snapshot;
  input.previous = &snapshot;
  input.host = &host;
  input.log_events = &no_events;
  AgentRecord agent{.state = AgentRecord::State::kRead, .database = "history.db", .last_sample = kNow};
  input.agent = &agent;
  HostHistory host_history{.maintenance = std::vector<MaintenanceDone>{{"dust_cleaning", kNow, ""},
                                                                       {"power_and_cabling", kNow, ""}}};
  input.host_history = &host_history;
  const std::vector<DiagnosticRecord> diagnostics{{.finished_at = kNow - std::chrono::hours(2),
                                                   .gpu_index = 0,
                                                   .uuid = snapshot.gpus[0].uuid.value(),
                                                   .test = "memtest",
                                                   .state = "passed"}};
  input.diagnostics = &diagnostics;
  input.now = kNow;
  std::vector<Finding> findings = EvaluateRules(input, config);

  std::set<std::string> ok_ids;
  for (const Finding& finding : findings) {
    EXPECT_EQ(finding.severity, Severity::kOk) << finding.id << ": " << finding.summary;
    EXPECT_FALSE(finding.summary.empty()) << finding.id;
    ok_ids.insert(finding.id);
  }
  for (std::string_view id : kRuleIds) EXPECT_TRUE(ok_ids.count(std::string(id))) << "no ok result from " << id;
  EXPECT_EQ(Single(findings, "temperature_high").summary, "All 2 GPUs below their warning temperatures (nearest: GPU 1 at 41 °C, warning at 77 °C)");
}

TEST(HealthyServer, NoInputGivesNoFindings) { EXPECT_TRUE(Evaluate(nullptr).empty()); }

TEST(HealthyServer, DisabledRuleIsSkipped) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].temperature_c = Field<uint32_t>::Value(99);
  HealthConfig config = ConfigWith("[rules.temperature_high]\nenabled = false\n");
  EXPECT_TRUE(WithId(EvaluateWith(config, &snapshot), "temperature_high").empty());
}

TEST(NvmlHang, HungGpuIsCritical) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[1].access_error = AccessError::kHang;
  snapshot.hangs.push_back({1, "0000:43:00.0", "nvmlDeviceGetTemperature", std::chrono::seconds(10), false});
  snapshot.hangs.push_back({1, "0000:43:00.0", "nvmlDeviceGetPowerUsage", std::chrono::seconds(10), true});
  Finding finding = Single(Evaluate(&snapshot), "nvml_hang");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  ASSERT_TRUE(finding.gpu.has_value());
  EXPECT_EQ(finding.gpu->index, 1u);
  EXPECT_EQ(finding.gpu->pci_bus_id, "0000:43:00.0");
  EXPECT_TRUE(EvidenceHas(finding, "nvmlDeviceGetTemperature did not return within 10s"));
  EXPECT_TRUE(EvidenceHas(finding, "still stuck"));
  EXPECT_FALSE(finding.cause.empty());
  EXPECT_FALSE(finding.actions.empty());
}

TEST(NvmlHang, HangAtStartIsCritical) {
  Snapshot snapshot;
  snapshot.driver_error = AccessError::kHang;
  snapshot.hangs.push_back({std::nullopt, "", "nvmlInit_v2", std::chrono::seconds(10), false});
  std::vector<Finding> findings = Evaluate(&snapshot);
  Finding finding = Single(findings, "nvml_hang");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "NVML hung in nvmlInit_v2");
  EXPECT_TRUE(WithId(findings, "driver_unavailable").empty());
}

TEST(DriverUnavailable, DriverNotLoadedIsCriticalWithItsOwnRemedy) {
  Snapshot snapshot;
  snapshot.driver_error = AccessError::kDriverNotLoaded;
  snapshot.driver_message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver";
  std::vector<Finding> findings = Evaluate(&snapshot);
  Finding finding = Single(findings, "driver_unavailable");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.cause, DefaultHealthConfig().RemedyFor("driver_unavailable", "driver_not_loaded").cause);
  EXPECT_TRUE(EvidenceHas(finding, "couldn't communicate"));
  // No GPU could be read, so the GPU rules have nothing to judge.
  EXPECT_TRUE(WithId(findings, "temperature_high").empty());
  EXPECT_EQ(Problems(findings).size(), 1u);
}

TEST(DriverUnavailable, MissingLibrary) {
  Snapshot snapshot;
  snapshot.driver_error = AccessError::kLibraryNotFound;
  Finding finding = Single(Evaluate(&snapshot), "driver_unavailable");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_NE(finding.cause.find("libnvidia-ml.so.1"), std::string::npos);
}

TEST(DriverMismatch, NvmlMismatchErrorIsCritical) {
  Snapshot snapshot;
  snapshot.driver_error = AccessError::kVersionMismatch;
  snapshot.driver_message = "Failed to initialize NVML: Driver/library version mismatch";
  std::vector<Finding> findings = Evaluate(&snapshot);
  EXPECT_EQ(Single(findings, "driver_mismatch").severity, Severity::kCritical);
  EXPECT_TRUE(WithId(findings, "driver_unavailable").empty());
}

TEST(DriverMismatch, ModuleVersionDiffersFromNvml) {
  Snapshot snapshot = HealthySnapshot();
  HostSignals host = HealthyHost();
  host.nvidia_module_version = Field<std::string>::Value("550.54.14");
  Finding finding = Single(Evaluate(&snapshot, &host), "driver_mismatch");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "Kernel module 550.54.14 but NVML library 550.54.15");
}

TEST(DriverMismatch, SameVersionWrittenDifferentlyIsOk) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.driver_version = Field<std::string>::Value("535.129.03");
  HostSignals host = HealthyHost();
  host.nvidia_module_version = Field<std::string>::Value("535.129.3");
  EXPECT_EQ(Single(Evaluate(&snapshot, &host), "driver_mismatch").severity, Severity::kOk);
}

TEST(NouveauLoaded, IsCritical) {
  Snapshot snapshot = HealthySnapshot();
  HostSignals host = HealthyHost();
  host.nouveau_loaded = Field<bool>::Value(true);
  EXPECT_EQ(Single(Evaluate(&snapshot, &host), "nouveau_loaded").severity, Severity::kCritical);
}

struct CudaCase {
  std::string required;
  std::string driver;
  int32_t cuda_driver_version;
  Severity expected;
};

class CudaIncompatibleTest : public ::testing::TestWithParam<CudaCase> {};

TEST_P(CudaIncompatibleTest, GradesDriverAgainstRequiredCuda) {
  const CudaCase& c = GetParam();
  Snapshot snapshot = HealthySnapshot();
  snapshot.driver_version = c.driver.empty() ? Field<std::string>::NotSupported() : Field<std::string>::Value(c.driver);
  snapshot.cuda_driver_version =
      c.cuda_driver_version == 0 ? Field<int32_t>::NotSupported() : Field<int32_t>::Value(c.cuda_driver_version);
  HealthConfig config = ConfigWith("[rules.cuda_incompatible]\nrequired = \"" + c.required + "\"\n");
  EXPECT_EQ(Single(EvaluateWith(config, &snapshot), "cuda_incompatible").severity, c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Table, CudaIncompatibleTest,
    ::testing::Values(CudaCase{"12.4", "550.54.15", 12040, Severity::kOk},
                      CudaCase{"12.4", "535.129.03", 12020, Severity::kWarning},  // minor version compatibility
                      CudaCase{"12.4", "470.82.01", 11040, Severity::kCritical},
                      CudaCase{"13.0", "550.54.15", 12040, Severity::kCritical},
                      CudaCase{"11.8", "550.54.15", 12040, Severity::kOk},
                      CudaCase{"12.4", "", 12020, Severity::kWarning},  // judged on NVML's CUDA version alone
                      CudaCase{"12.4", "", 0, Severity::kUnknown}));

TEST(NoDevices, NvmlWithoutGpusIsCritical) {
  Snapshot snapshot = HealthySnapshot(0);
  HostSignals host = HealthyHost(2);
  Finding finding = Single(Evaluate(&snapshot, &host), "no_devices");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_TRUE(EvidenceHas(finding, "NVIDIA GPUs on the PCI bus: 2"));
}

TEST(GpuCountMismatch, FewerGpusThanExpectedIsCritical) {
  Snapshot snapshot = HealthySnapshot(2);
  HealthConfig config = ConfigWith("[rules.gpu_count_mismatch]\nexpected = 8\n");
  Finding finding = Single(EvaluateWith(config, &snapshot), "gpu_count_mismatch");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "NVML sees 2 GPUs, 8 expected");
}

TEST(CaptureIncomplete, ACaptureCutShortIsUnknownWithItsOwnRemedy) {
  Snapshot snapshot = HealthySnapshot(1);
  snapshot.source = "nvidia-smi:node7.xml";
  snapshot.incomplete_reasons = {"the XML is cut short or damaged: Start-end tags mismatch at byte 2999 of 3000",
                                 "it names 2 attached GPUs but describes 1"};
  Finding finding = Single(Evaluate(&snapshot), "capture_incomplete");
  EXPECT_EQ(finding.severity, Severity::kUnknown);
  EXPECT_EQ(finding.summary, "The capture is incomplete: the findings cover only the 1 GPU it describes");
  EXPECT_EQ(finding.evidence, (std::vector<std::string>{"source: nvidia-smi:node7.xml",
                                                        snapshot.incomplete_reasons[0], snapshot.incomplete_reasons[1]}));
  EXPECT_EQ(finding.cause, DefaultHealthConfig().RemedyFor("capture_incomplete").cause);
  EXPECT_NE(finding.cause, DefaultHealthConfig().RemedyFor("field_error").cause);
  EXPECT_FALSE(finding.actions.empty());
}

TEST(GpuMissing, GpuOnBusButNotInNvmlIsCritical) {
  Snapshot snapshot = HealthySnapshot(2);
  HostSignals host = HealthyHost(3);
  host.pci_gpus.value()[2].driver = "";
  Finding finding = Single(Evaluate(&snapshot, &host), "gpu_missing");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  ASSERT_TRUE(finding.gpu.has_value());
  EXPECT_EQ(finding.gpu->pci_bus_id, "0000:6b:00.0");
  EXPECT_TRUE(EvidenceHas(finding, "driver none"));
}

TEST(GpuLost, LostGpuIsCritical) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].access_error = AccessError::kGpuLost;
  snapshot.gpus[0].access_message = "GPU is lost";
  std::vector<Finding> findings = Evaluate(&snapshot);
  Finding finding = Single(findings, "gpu_lost");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.gpu->index, 0u);
  EXPECT_TRUE(WithId(findings, "gpu_unreachable").front().severity == Severity::kOk);
}

TEST(GpuUnreachable, ResetRequiredIsCriticalWithResetRemedy) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[1].access_error = AccessError::kResetRequired;
  Finding finding = Single(Evaluate(&snapshot), "gpu_unreachable");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "GPU 1 needs a reset");
  EXPECT_EQ(finding.cause, DefaultHealthConfig().RemedyFor("gpu_unreachable", "reset_required").cause);
}

TEST(FieldError, FailedReadingIsAWarningNamingTheField) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].power_limit_w = Field<double>::Failed("Unknown Error");
  Finding finding = Single(Evaluate(&snapshot), "field_error");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "GPU 0: 1 reading failed (power_limit_w)");
  EXPECT_TRUE(EvidenceHas(finding, "power_limit_w: Unknown Error"));
}

// A GPU that answers none of its temperature, power and utilization (nvidia-smi: a whole row of ERR!) cannot be
// watched at all: critical, where a few failed readings are a warning.
TEST(FieldError, AGpuThatReportsNoneOfItsCoreReadingsIsCritical) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].temperature_c = Field<uint32_t>::Failed("ERR!");
  snapshot.gpus[0].power_draw_w = Field<double>::Failed("ERR!");
  EXPECT_EQ(Single(Evaluate(&snapshot), "field_error").severity, Severity::kWarning);
  snapshot.gpus[0].utilization_gpu_percent = Field<uint32_t>::Failed("ERR!");
  Finding finding = Single(Evaluate(&snapshot), "field_error");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary,
            "GPU 0: 3 readings failed (temperature_c, power_draw_w and utilization_gpu_percent): it reports neither "
            "its temperature, its power nor its utilization");
}

// Each card is judged by the limit NVML reports for it: critical at its
// maximum operating temperature (87 °C here), warning 10 °C below.
TEST(TemperatureHigh, GradesAgainstTheCardsOwnLimit) {
  Snapshot snapshot = HealthySnapshot(3);
  snapshot.gpus[0].temperature_c = Field<uint32_t>::Value(78);
  snapshot.gpus[1].temperature_c = Field<uint32_t>::Value(88);
  snapshot.gpus[2].temperature_c = Field<uint32_t>::Value(76);  // the guides' 75 °C is not this card's line
  std::vector<Finding> findings = WithId(Evaluate(&snapshot), "temperature_high");
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_EQ(findings[0].gpu->index, 0u);
  EXPECT_EQ(findings[0].summary, "GPU 0 at 78 °C (warning at 77 °C)");
  EXPECT_TRUE(EvidenceHas(findings[0], "from its maximum operating temperature 87 °C"));
  EXPECT_EQ(findings[1].severity, Severity::kCritical);
  EXPECT_EQ(findings[1].summary, "GPU 1 at 88 °C (critical at 87 °C)");
  EXPECT_NE(findings[1].actions.front().find("dust"), std::string::npos);
}

// The guides' 75 and 80 °C: for a card that reports no limit, or for every
// card when the site says so.
TEST(TemperatureHigh, TheConfiguredFiguresWhereTheCardHasNoBetterOne) {
  Snapshot snapshot = HealthySnapshot(2);
  for (GpuSnapshot& gpu : snapshot.gpus) {
    gpu.temperature_max_operating_c = Field<uint32_t>::NotSupported();
    gpu.temperature_slowdown_c = Field<uint32_t>::NotSupported();
  }
  snapshot.gpus[0].temperature_c = Field<uint32_t>::Value(76);
  snapshot.gpus[1].temperature_c = Field<uint32_t>::Value(81);
  std::vector<Finding> findings = WithId(Evaluate(&snapshot), "temperature_high");
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].summary, "GPU 0 at 76 °C (warning at 75 °C)");
  EXPECT_TRUE(EvidenceHas(findings[0], "(the configured figures)"));
  EXPECT_EQ(findings[1].summary, "GPU 1 at 81 °C (critical at 80 °C)");

  Snapshot limited = HealthySnapshot(1);
  limited.gpus[0].temperature_c = Field<uint32_t>::Value(76);
  EXPECT_EQ(Single(Evaluate(&limited), "temperature_high").severity, Severity::kOk);
  HealthConfig config = ConfigWith("[rules.temperature_high]\nuse_gpu_limits = false\n");
  EXPECT_EQ(Single(EvaluateWith(config, &limited), "temperature_high").summary, "GPU 0 at 76 °C (warning at 75 °C)");
}

TEST(TemperatureHigh, LowGpuLimitLowersThresholds) {
  // A laptop GPU whose maximum operating temperature is 57 °C.
  Snapshot snapshot = HealthySnapshot(1);
  snapshot.gpus[0].temperature_c = Field<uint32_t>::Value(56);
  snapshot.gpus[0].temperature_max_operating_c = Field<uint32_t>::Value(57);
  snapshot.gpus[0].temperature_slowdown_c = Field<uint32_t>::Value(97);
  Finding finding = Single(Evaluate(&snapshot), "temperature_high");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_TRUE(EvidenceHas(finding, "warning at 47 °C, critical at 57 °C"));
  EXPECT_TRUE(EvidenceHas(finding, "maximum operating temperature 57 °C"));
  snapshot.gpus[0].temperature_c = Field<uint32_t>::Value(57);
  EXPECT_EQ(Single(Evaluate(&snapshot), "temperature_high").severity, Severity::kCritical);
}

// HBM has a limit of its own, which NVML reports; a hot memory under a cool
// GPU die is its own finding (subject "memory").
TEST(TemperatureHigh, TheMemoryIsJudgedByItsOwnLimit) {
  Snapshot snapshot = HealthySnapshot(2);
  for (GpuSnapshot& gpu : snapshot.gpus) gpu.memory_temperature_max_c = Field<uint32_t>::Value(95);
  snapshot.gpus[1].memory_temperature_c = Field<uint32_t>::Value(96);
  Finding finding = Single(Evaluate(&snapshot), "temperature_high");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.subject, "memory");
  EXPECT_EQ(finding.summary, "GPU 1 memory at 96 °C (critical at 95 °C)");
  EXPECT_TRUE(EvidenceHas(finding, "from its memory's maximum operating temperature 95 °C"));
  snapshot.gpus[1].memory_temperature_c = Field<uint32_t>::Value(60);
  Finding ok = Single(Evaluate(&snapshot), "temperature_high");
  EXPECT_EQ(ok.severity, Severity::kOk);
  EXPECT_TRUE(EvidenceHas(ok, "memory judged on 2 GPUs"));
}

TEST(TemperatureHigh, ConfigOverridesThresholds) {
  Snapshot snapshot = HealthySnapshot(1);
  snapshot.gpus[0].temperature_c = Field<uint32_t>::Value(61);
  HealthConfig config = ConfigWith("[rules.temperature_high]\ngpu_limit_margin_c = 30\n");
  EXPECT_EQ(Single(EvaluateWith(config, &snapshot), "temperature_high").severity, Severity::kWarning);
  config = ConfigWith("[rules.temperature_high]\nuse_gpu_limits = false\nwarning_c = 60\n");
  EXPECT_EQ(Single(EvaluateWith(config, &snapshot), "temperature_high").severity, Severity::kWarning);
}

TEST(TemperatureHigh, UnreadableTemperatureIsUnknown) {
  Snapshot snapshot = HealthySnapshot(1);
  snapshot.gpus[0].temperature_c = Field<uint32_t>::Failed("Unknown Error");
  Finding finding = Single(Evaluate(&snapshot), "temperature_high");
  EXPECT_EQ(finding.severity, Severity::kUnknown);
  EXPECT_EQ(finding.cause, DefaultHealthConfig().RemedyFor("field_error").cause);
}

TEST(FanFailure, StoppedFanOnHotGpuIsCritical) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[1].temperature_c = Field<uint32_t>::Value(70);
  snapshot.gpus[1].fan_speeds_percent = Field<std::vector<uint32_t>>::Value({45, 0});
  Finding finding = Single(Evaluate(&snapshot), "fan_failure");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "GPU 1 fan 1 at 0% while the GPU is at 70 °C");
}

TEST(FanFailure, StoppedFanOnCoolGpuIsFine) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].fan_speeds_percent = Field<std::vector<uint32_t>>::Value({0});
  EXPECT_EQ(Single(Evaluate(&snapshot), "fan_failure").severity, Severity::kOk);
}

TEST(FanFailure, FanErrorIsAWarning) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].fan_speeds_percent = Field<std::vector<uint32_t>>::Failed("ERR!");
  Finding finding = Single(Evaluate(&snapshot), "fan_failure");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_TRUE(EvidenceHas(finding, "ERR!"));
}

TEST(FanFailure, ChassisFanFaultFromBmc) {
  Snapshot snapshot = HealthySnapshot();
  HostSignals host = HealthyHost();
  host.ipmi_sensors.value().push_back(
      {"ipmi", "Fan2A", SensorKind::kFan, 0.0, "RPM", SensorStatus::kCritical, "0 RPM"});
  Finding finding = Single(Evaluate(&snapshot, &host), "fan_failure");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "Chassis fan 'Fan2A' reports a fault");
}

// SXM GPUs have no fans: NVML reports fan speed as not supported.
Snapshot PassivelyCooled(uint32_t count) {
  Snapshot snapshot = HealthySnapshot(count);
  for (GpuSnapshot& gpu : snapshot.gpus) gpu.fan_speeds_percent = Field<std::vector<uint32_t>>::NotSupported();
  return snapshot;
}

TEST(FanFailure, PassivelyCooledGpusAreJudgedByTheChassisFans) {
  Snapshot snapshot = PassivelyCooled(8);
  HostSignals host = HealthyHost(8);  // the BMC reports one fan
  Finding finding = Single(Evaluate(&snapshot, &host), "fan_failure");
  EXPECT_EQ(finding.severity, Severity::kOk);
  EXPECT_EQ(finding.summary, "Fans turning (1 chassis fan; 8 GPUs passively cooled)");
}

TEST(FanFailure, WithoutAnyFanTheChecklistSaysWhyItIsNotChecked) {
  Snapshot snapshot = PassivelyCooled(8);
  HostSignals host = HealthyHost(8);
  host.ipmi_sensors = Field<std::vector<Sensor>>::NotSupported();
  HealthInput input;
  input.snapshot = &snapshot;
  input.host = &host;
  input.now = kNow;
  std::vector<UncheckedRule> unchecked;
  std::vector<Finding> findings = EvaluateRules(input, DefaultHealthConfig(), unchecked);
  EXPECT_TRUE(WithId(findings, "fan_failure").empty());

  Checklist checklist = BuildChecklist(findings, DefaultHealthConfig(), unchecked);
  const ChecklistItem& fans = checklist.items[1];
  ASSERT_EQ(fans.title, "Fans turning");
  EXPECT_FALSE(fans.checked);
  EXPECT_EQ(fans.summary,
            "not checked: the GPUs are passively cooled (NVML reports no fan on them) and no chassis fan sensor could "
            "be read (hwmon: no fan sensor with a reading; IPMI: ipmitool not installed, or [host] ipmi = false)");
}

TEST(ClockThrottle, HardwareSlowdownIsCritical) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].clock_event_reasons =
      Field<uint64_t>::Value(clock_event::kHwSlowdown | clock_event::kHwThermalSlowdown);
  Finding finding = Single(Evaluate(&snapshot), "clock_throttle");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "GPU 0 clocks slowed: hw_slowdown and hw_thermal_slowdown");
}

TEST(ClockThrottle, SoftwareThermalSlowdownIsAWarning) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].clock_event_reasons = Field<uint64_t>::Value(clock_event::kSwThermalSlowdown);
  EXPECT_EQ(Single(Evaluate(&snapshot), "clock_throttle").severity, Severity::kWarning);
}

TEST(ClockThrottle, PowerBrakeUsesPowerRemedy) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].clock_event_reasons =
      Field<uint64_t>::Value(clock_event::kHwSlowdown | clock_event::kHwPowerBrakeSlowdown);
  Finding finding = Single(Evaluate(&snapshot), "clock_throttle");
  EXPECT_EQ(finding.cause, DefaultHealthConfig().RemedyFor("clock_throttle", "power_brake").cause);
}

TEST(ClockThrottle, PowerCapUnderLoadIsNormal) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].clock_event_reasons = Field<uint64_t>::Value(clock_event::kSwPowerCap);
  snapshot.gpus[0].power_draw_w = Field<double>::Value(699);
  std::vector<Finding> findings = Evaluate(&snapshot);
  EXPECT_EQ(Single(findings, "clock_throttle").severity, Severity::kOk);
  Finding power = Single(findings, "power_capped");
  EXPECT_EQ(power.severity, Severity::kOk);
  EXPECT_TRUE(EvidenceHas(power, "GPU 0 at the power cap"));
}

TEST(PowerCapped, DrawAboveLimitIsAWarning) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].power_draw_w = Field<double>::Value(228.82);
  snapshot.gpus[0].power_limit_w = Field<double>::Value(210);
  Finding finding = Single(Evaluate(&snapshot), "power_capped");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "GPU 0 draws 228.8 W, above its 210 W limit");
}

TEST(PsuFault, BmcPowerSupplyFailureIsCritical) {
  Snapshot snapshot = HealthySnapshot();
  HostSignals host = HealthyHost();
  host.ipmi_sensors.value().push_back({"ipmi", "PS2 Status", SensorKind::kPowerSupply, std::nullopt, "",
                                       SensorStatus::kCritical, "Presence detected, Power Supply AC lost"});
  Finding finding = Single(Evaluate(&snapshot, &host), "psu_fault");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "Power supply 'PS2 Status': Presence detected, Power Supply AC lost");
}

TEST(SensorAlarm, VoltageOutOfRange) {
  HostSignals host = HealthyHost();
  host.ipmi_sensors.value()[3].status = SensorStatus::kCritical;
  Finding finding = Single(Evaluate(nullptr, &host), "sensor_alarm");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "voltage sensor 'Voltage 1' beyond its alarm threshold");
}

TEST(InletTemperature, OutsideRecommendedRange) {
  HostSignals host = HealthyHost();
  for (auto [value, expected] : {std::pair{27.0, Severity::kWarning}, std::pair{36.0, Severity::kCritical},
                                 std::pair{14.0, Severity::kWarning}, std::pair{20.0, Severity::kOk}}) {
    host.ipmi_sensors.value()[0].value = value;
    EXPECT_EQ(Single(Evaluate(nullptr, &host), "inlet_temperature").severity, expected) << value;
  }
  // The inlet sensor's own alarm is reported here, not as a sensor alarm.
  host.ipmi_sensors.value()[0].status = SensorStatus::kCritical;
  EXPECT_EQ(Single(Evaluate(nullptr, &host), "sensor_alarm").severity, Severity::kOk);
}

TEST(EccUncorrectable, VolatileErrorsAreCritical) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].ecc_volatile_uncorrected = Field<uint64_t>::Value(2);
  snapshot.gpus[0].ecc_aggregate_uncorrected = Field<uint64_t>::Value(2);
  Finding finding = Single(Evaluate(&snapshot), "ecc_uncorrectable");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "GPU 0: 2 uncorrectable ECC errors since the driver loaded");
}

TEST(EccUncorrectable, LifetimeErrorsAreAWarning) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[1].ecc_aggregate_uncorrected = Field<uint64_t>::Value(1);
  EXPECT_EQ(Single(Evaluate(&snapshot), "ecc_uncorrectable").severity, Severity::kWarning);
}

TEST(EccCorrectedHigh, ManyCorrectedErrorsAreAWarning) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].ecc_volatile_corrected = Field<uint64_t>::Value(5000);
  EXPECT_EQ(Single(Evaluate(&snapshot), "ecc_corrected_high").severity, Severity::kWarning);
}

TEST(RetiredPages, PendingAndLimit) {
  Snapshot snapshot = HealthySnapshot(3);
  snapshot.gpus[0].retired_pages_pending = Field<bool>::Value(true);
  snapshot.gpus[1].retired_pages_sbe = Field<uint32_t>::Value(40);
  snapshot.gpus[1].retired_pages_dbe = Field<uint32_t>::Value(20);
  snapshot.gpus[2].retired_pages_sbe = Field<uint32_t>::Value(16);
  std::vector<Finding> findings = WithId(Evaluate(&snapshot), "retired_pages");
  ASSERT_EQ(findings.size(), 3u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_EQ(findings[0].summary, "GPU 0 has memory pages waiting to be retired: reset needed");
  EXPECT_EQ(findings[1].severity, Severity::kCritical);
  EXPECT_EQ(findings[2].severity, Severity::kWarning);
}

TEST(RemappedRowsPending, PendingRemapIsAWarning) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].remapped_rows_uncorrectable = Field<uint32_t>::Value(4);
  snapshot.gpus[0].remapped_rows_pending = Field<bool>::Value(true);
  Finding finding = Single(Evaluate(&snapshot), "remapped_rows_pending");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_TRUE(EvidenceHas(finding, "0 for correctable errors, 4 for uncorrectable errors"));
}

TEST(RowRemapFailure, IsCritical) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[1].remapped_rows_failure = Field<bool>::Value(true);
  Finding finding = Single(Evaluate(&snapshot), "row_remap_failure");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_NE(finding.actions.back().find("RMA"), std::string::npos);
}

TEST(InforomCorrupted, IsAWarningOnTheGpuItConcerns) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[1].inforom_valid = Field<bool>::Value(false);
  Finding finding = Single(Evaluate(&snapshot), "inforom_corrupted");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  ASSERT_TRUE(finding.gpu.has_value());
  EXPECT_EQ(finding.gpu->index, 1u);
}

TEST(MemoryHigh, AboveNinetyPercentIsAWarning) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].memory_used_bytes = Field<uint64_t>::Value(78ull << 30);
  snapshot.gpus[0].processes =
      Field<std::vector<ProcessInfo>>::Value({{4242, "python3", Field<uint64_t>::Value(77ull << 30)}});
  Finding finding = Single(Evaluate(&snapshot), "memory_high");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "GPU 0 memory 97.5% used");
  EXPECT_TRUE(EvidenceHas(finding, "pid 4242 python3: 77.0 GiB"));
  // Without the process's command line, the action still names trace-alloc.
  EXPECT_EQ(finding.actions.back(),
            "If the memory keeps growing, find the calls that allocate it and never free it: run the program again "
            "as gpudoctor trace-alloc -- COMMAND");
}

TEST(MemoryHigh, TheActionRunsTheLargestProcessUnderTraceAlloc) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].memory_used_bytes = Field<uint64_t>::Value(78ull << 30);
  snapshot.gpus[0].processes = Field<std::vector<ProcessInfo>>::Value(
      {{17, "sidecar", Field<uint64_t>::Value(1ull << 30)}, {4242, "python3", Field<uint64_t>::Value(76ull << 30)}});
  HealthInput input;
  input.snapshot = &snapshot;
  input.now = kNow;
  std::vector<std::pair<uint32_t, std::string>> asked;
  input.command_lines = [&asked](uint32_t pid, const std::string& name) {
    asked.emplace_back(pid, name);
    return std::vector<std::string>{"python3", "train.py", "--run", "my run"};
  };
  Finding finding = Single(EvaluateRules(input, DefaultHealthConfig()), "memory_high");
  EXPECT_EQ(asked, (std::vector<std::pair<uint32_t, std::string>>{{4242, "python3"}})) << "the largest only";
  EXPECT_TRUE(EvidenceHas(finding, "pid 4242 command line: python3 train.py --run 'my run'"));
  EXPECT_EQ(finding.actions.back(),
            "If the memory keeps growing, find the calls that allocate it and never free it: run the program again "
            "as gpudoctor trace-alloc -- python3 train.py --run 'my run'");

  snapshot.source = "nvidia-smi:capture.xml";  // another machine's processes: /proc here says nothing of them
  asked.clear();
  finding = Single(EvaluateRules(input, DefaultHealthConfig()), "memory_high");
  EXPECT_TRUE(asked.empty());
  EXPECT_NE(finding.actions.back().find("trace-alloc -- COMMAND"), std::string::npos);
}

TEST(PcieLinkDegraded, NarrowLinkIsAWarning) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[1].pcie_width_current = Field<uint32_t>::Value(8);
  Finding finding = Single(Evaluate(&snapshot), "pcie_link_degraded");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "GPU 1 PCIe link degraded: x8 instead of x16");
}

TEST(PcieLinkDegraded, LowGenerationCountsOnlyUnderLoad) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].pcie_generation_current = Field<uint32_t>::Value(1);
  Finding idle = Single(Evaluate(&snapshot), "pcie_link_degraded");
  EXPECT_EQ(idle.severity, Severity::kOk);
  EXPECT_TRUE(EvidenceHas(idle, "while idle"));
  snapshot.gpus[0].utilization_gpu_percent = Field<uint32_t>::Value(95);
  EXPECT_EQ(Single(Evaluate(&snapshot), "pcie_link_degraded").severity, Severity::kWarning);
}

TEST(PcieLinkDegraded, KernelLinkWidthJudgesGpusNvmlCannot) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[1].pcie_width_current = Field<uint32_t>::NotSupported();
  snapshot.gpus[1].pcie_generation_current = Field<uint32_t>::NotSupported();
  HostSignals host = HealthyHost();
  host.pci_gpus.value()[1].link.current_width = Field<uint32_t>::Value(4);
  Finding finding = Single(Evaluate(&snapshot, &host), "pcie_link_degraded");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.gpu->index, 1u);
  EXPECT_TRUE(EvidenceHas(finding, "current_link_width 4, max_link_width 16"));
}

TEST(PcieReplay, RisingCounterIsAWarning) {
  Snapshot before = HealthySnapshot();
  before.taken_at = kNow - minutes(2);
  before.gpus[0].pcie_replay_count = Field<uint64_t>::Value(10);
  Snapshot now = HealthySnapshot();
  now.gpus[0].pcie_replay_count = Field<uint64_t>::Value(110);
  Finding finding = Single(Evaluate(&now, nullptr, nullptr, &before), "pcie_replay");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "GPU 0 PCIe replay counter rose by 100 in 2m");

  now.gpus[0].pcie_replay_count = Field<uint64_t>::Value(20);  // 5 a minute: below the limit
  EXPECT_EQ(Single(Evaluate(&now, nullptr, nullptr, &before), "pcie_replay").severity, Severity::kOk);
  now.gpus[0].pcie_replay_count = Field<uint64_t>::Value(3);  // reset since: 3 new
  EXPECT_EQ(Single(Evaluate(&now, nullptr, nullptr, &before), "pcie_replay").severity, Severity::kOk);
}

TEST(PcieReplay, SingleSnapshotCannotJudgeARise) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[0].pcie_replay_count = Field<uint64_t>::Value(5000);
  Finding finding = Single(Evaluate(&snapshot), "pcie_replay");
  EXPECT_EQ(finding.severity, Severity::kOk);
  EXPECT_TRUE(EvidenceHas(finding, "GPU 0: 5000 replays"));
}

TEST(NvlinkDown, InactiveLinkIsCritical) {
  Snapshot snapshot = HealthySnapshot();
  snapshot.gpus[1].nvlinks.value()[2].active = Field<bool>::Value(false);
  Finding finding = Single(Evaluate(&snapshot), "nvlink_down");
  EXPECT_EQ(finding.severity, Severity::kCritical);
  EXPECT_EQ(finding.summary, "GPU 1 NVLink 2 down");
  EXPECT_TRUE(EvidenceHas(finding, "3 of 4 links up"));
}

TEST(NvlinkDown, ServerWithoutActiveLinksHasNoNvlink) {
  Snapshot snapshot = HealthySnapshot();
  for (GpuSnapshot& gpu : snapshot.gpus)
    for (NvLinkInfo& link : gpu.nvlinks.value()) link.active = Field<bool>::Value(false);
  EXPECT_TRUE(WithId(Evaluate(&snapshot), "nvlink_down").empty());
}

TEST(NvlinkDown, AnSxmModuleWithNoLinkUpIsAWarningWhateverTheServer) {
  Snapshot snapshot = HealthySnapshot();
  for (GpuSnapshot& gpu : snapshot.gpus)
    for (NvLinkInfo& link : gpu.nvlinks.value()) link.active = Field<bool>::Value(false);
  snapshot.gpus[1].name = Field<std::string>::Value("NVIDIA A100-SXM4-80GB");
  Finding finding = Single(Evaluate(&snapshot), "nvlink_down");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "GPU 1: no NVLink up on an SXM module");
  EXPECT_TRUE(EvidenceHas(finding, "0 of 4 links up"));
  // Links listed only with their error counters (nvlink -e) say nothing of their state.
  for (NvLinkInfo& link : snapshot.gpus[1].nvlinks.value()) link.active = Field<bool>();
  EXPECT_TRUE(WithId(Evaluate(&snapshot), "nvlink_down").empty());
  // nvidia-smi's "all links are inactive": the list is known and empty.
  snapshot.gpus[1].nvlinks = Field<std::vector<NvLinkInfo>>::Value({});
  EXPECT_TRUE(EvidenceHas(Single(Evaluate(&snapshot), "nvlink_down"), "every link inactive"));
  // A lone SXM GPU (a virtual machine given one GPU of a baseboard) has no peer to link to.
  Snapshot lone = HealthySnapshot(1);
  lone.gpus[0].name = Field<std::string>::Value("NVIDIA A100-SXM4-40GB");
  lone.gpus[0].nvlinks = Field<std::vector<NvLinkInfo>>::Value({});
  EXPECT_TRUE(WithId(Evaluate(&lone), "nvlink_down").empty());
  // Blackwell's B200 and GB200 are made only as modules on an NVLink baseboard; their names do not say SXM.
  for (const char* name : {"NVIDIA B200", "NVIDIA GB200"}) {
    snapshot.gpus[1].name = Field<std::string>::Value(name);
    EXPECT_EQ(Single(Evaluate(&snapshot), "nvlink_down").summary, "GPU 1: no NVLink up on an SXM module") << name;
  }
  snapshot.gpus[1].name = Field<std::string>::Value("NVIDIA GB200X");  // no such module: a word, not a model
  EXPECT_TRUE(WithId(Evaluate(&snapshot), "nvlink_down").empty());
}

TEST(NvlinkErrors, RisingErrorsAreAWarning) {
  Snapshot before = HealthySnapshot();
  before.taken_at = kNow - minutes(1);
  Snapshot now = HealthySnapshot();
  now.gpus[0].nvlinks.value()[1].recovery_errors = Field<uint64_t>::Value(30);
  Finding finding = Single(Evaluate(&now, nullptr, nullptr, &before), "nvlink_errors");
  EXPECT_EQ(finding.severity, Severity::kWarning);
  EXPECT_EQ(finding.summary, "GPU 0 NVLink 1 errors rising: +30 in 1m");
  EXPECT_TRUE(EvidenceHas(finding, "recovery errors: +30"));
}

TEST(BadInput, SnapshotOfFailuresNeverCrashes) {
  Snapshot snapshot;
  snapshot.driver_version = Field<std::string>::Failed("x");
  snapshot.device_count = Field<uint32_t>::Failed("x");
  GpuSnapshot gpu;
  gpu.index = 7;
  gpu.temperature_c = Field<uint32_t>::Failed("x");
  gpu.memory_total_bytes = Field<uint64_t>::Value(0);
  gpu.memory_used_bytes = Field<uint64_t>::Value(5);
  gpu.power_limit_w = Field<double>::Value(0);
  gpu.power_draw_w = Field<double>::Value(100);
  gpu.nvlinks = Field<std::vector<NvLinkInfo>>::Value({NvLinkInfo{}});
  snapshot.gpus = {gpu, gpu};
  snapshot.hangs.push_back({42, "", "", {}, false});
  snapshot.xid_events.push_back({99, 1ull << 40, kNow});
  HostSignals host;
  host.disks.push_back({"/", Field<FileSystemSpace>::Value({})});
  host.backups.push_back({"/b", Field<BackupScan>::Value({})});
  host.memory = Field<MemoryInfo>::Value({});
  std::vector<LogEvent> events(3);
  events[0].kind = "xid";
  events[1].kind = "xid";
  events[1].xid = 79;
  events[1].pci_bus_id = "garbage";
  std::vector<Finding> findings = Evaluate(&snapshot, &host, &events, &snapshot);
  for (const Finding& finding : findings) EXPECT_FALSE(finding.summary.empty()) << finding.id;
  EXPECT_FALSE(WithId(findings, "field_error").empty());
}

}  // namespace
}  // namespace gpudoctor
