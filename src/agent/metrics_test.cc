#include "agent/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "net/prometheus_text_parser.h"
#include "agent/subprocess.h"
#include "agent/testing/synthetic_agent.h"
#include "common/text.h"

namespace gpudoctor {
namespace {

using std::chrono::seconds;

const WallTime kNow = FromUnixMillis(1'714'564'800'000);

struct Scene {
  Snapshot snapshot = SyntheticSnapshot(8, kNow - seconds(2));
  std::vector<StoredFinding> findings;
  std::vector<ChecklistItem> checklist;
  AgentStatus status;
  AlertCounters alerts;
  bool with_alerts = false;

  Scene() {
    status.started_at = kNow - std::chrono::hours(1);
    status.last_sample_at = snapshot.taken_at;
    status.samples_total = 720;
    status.probe_hangs_total = 2;
  }

  std::string Render(MetricsOptions options = {}) const {
    MetricsInput input{.snapshot = &snapshot,
                       .findings = findings,
                       .checklist = checklist,
                       .status = status,
                       .now = kNow,
                       .alerts = with_alerts ? &alerts : nullptr};
    return RenderPrometheusMetrics(input, options);
  }

  PromExposition Parse(MetricsOptions options = {}) const {
    const std::string text = Render(options);
    Result<PromExposition> parsed = ParsePrometheusText(text);
    EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message) << "\n" << text;
    return parsed.ok() ? *parsed : PromExposition{};
  }
};

std::map<std::string, std::string> Gpu(int index) { return {{"gpu", std::to_string(index)}}; }

TEST(Metrics, GpuReadingsCarryUnitsAndIdentityLabels) {
  Scene scene;
  const GpuSnapshot& gpu0 = scene.snapshot.gpus[0];
  const PromExposition e = scene.Parse();

  const std::vector<const PromSample*> temperature = e.Find("gpudoctor_gpu_temperature_celsius", Gpu(0));
  ASSERT_EQ(temperature.size(), 1u);
  EXPECT_EQ(temperature[0]->labels.at("uuid"), gpu0.uuid.value());
  EXPECT_EQ(temperature[0]->labels.at("pci_bus_id"), "0000:18:00.0");
  EXPECT_EQ(temperature[0]->labels.at("hostname"), kSyntheticHostname);
  EXPECT_EQ(temperature[0]->value, gpu0.temperature_c.value());

  EXPECT_EQ(e.Value("gpudoctor_gpu_power_watts", Gpu(0)), gpu0.power_draw_w.value());
  EXPECT_EQ(e.Value("gpudoctor_gpu_power_limit_watts", Gpu(0)), 700);
  EXPECT_TRUE(e.Find("gpudoctor_gpu_power_default_limit_watts", Gpu(0)).empty()) << "not read: no series";
  EXPECT_DOUBLE_EQ(*e.Value("gpudoctor_gpu_utilization_ratio", Gpu(0)),
                   gpu0.utilization_gpu_percent.value() / 100.0);
  EXPECT_EQ(e.Value("gpudoctor_gpu_memory_used_bytes", Gpu(0)),
            static_cast<double>(gpu0.memory_used_bytes.value()));
  EXPECT_EQ(e.Value("gpudoctor_gpu_memory_total_bytes", Gpu(0)), 80.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(e.Value("gpudoctor_gpu_sm_clock_hertz", Gpu(0)), 1980e6);
  EXPECT_EQ(e.Value("gpudoctor_gpu_ecc_errors_total",
                    {{"gpu", "5"}, {"type", "uncorrected"}, {"scope", "volatile"}}),
            1);
  EXPECT_EQ(e.Value("gpudoctor_gpu_remapped_rows_pending", Gpu(5)), 1);
  EXPECT_EQ(e.Value("gpudoctor_gpu_clock_event_active", {{"gpu", "2"}, {"reason", "gpu_idle"}}), 1);
  EXPECT_EQ(e.Value("gpudoctor_gpu_clock_event_active", {{"gpu", "0"}, {"reason", "gpu_idle"}}), 0);
  EXPECT_EQ(e.Value("gpudoctor_gpu_nvlink_active_links", Gpu(0)), 18);
  EXPECT_EQ(e.Value("gpudoctor_gpu_nvlink_errors_total", {{"gpu", "0"}, {"type", "replay"}}), 0);
  EXPECT_EQ(e.Value("gpudoctor_gpu_accessible", Gpu(7)), 1);
  EXPECT_EQ(e.Find("gpudoctor_gpu_info").size(), 8u);
  EXPECT_EQ(e.Value("gpudoctor_gpus"), 8);

  EXPECT_EQ(e.families.at("gpudoctor_gpu_temperature_celsius").type, "gauge");
  EXPECT_EQ(e.families.at("gpudoctor_gpu_pcie_replays_total").type, "counter");
  EXPECT_FALSE(e.families.at("gpudoctor_gpu_power_watts").help.empty());
}

TEST(Metrics, MissingReadingsHaveNoSampleNeverZero) {
  Scene scene;
  scene.snapshot.gpus[0].temperature_c = Field<uint32_t>::NotSupported();
  scene.snapshot.gpus[1].power_draw_w = Field<double>::Failed("NVML_ERROR_UNKNOWN");
  for (GpuSnapshot& gpu : scene.snapshot.gpus) gpu.memory_temperature_c = Field<uint32_t>::NotSupported();
  const PromExposition e = scene.Parse();

  EXPECT_TRUE(e.Find("gpudoctor_gpu_temperature_celsius", Gpu(0)).empty());
  EXPECT_EQ(e.Find("gpudoctor_gpu_temperature_celsius").size(), 7u);
  EXPECT_TRUE(e.Find("gpudoctor_gpu_power_watts", Gpu(1)).empty());
  EXPECT_EQ(e.Find("gpudoctor_gpu_power_watts").size(), 7u);
  // A reading no GPU has leaves no family behind, not even its HELP line.
  EXPECT_FALSE(e.families.contains("gpudoctor_gpu_memory_temperature_celsius"));
  EXPECT_EQ(scene.Render().find("memory_temperature"), std::string::npos);
  // Synthetic boards have no fans and no page retirement.
  EXPECT_FALSE(e.families.contains("gpudoctor_gpu_fan_speed_ratio"));
  EXPECT_TRUE(e.Find("gpudoctor_gpu_retired_pages").empty());
}

TEST(Metrics, NvLinkCountersAreSummedOverLinks) {
  Scene scene;
  auto& links = scene.snapshot.gpus[1].nvlinks.value();
  links[1].replay_errors = Field<uint64_t>::Value(5);
  links[2].replay_errors = Field<uint64_t>::Value(7);
  links[3].active = Field<bool>::Value(false);
  links[4].active = Field<bool>::NotSupported();
  scene.snapshot.gpus[2].nvlinks = Field<std::vector<NvLinkInfo>>::NotSupported();
  const PromExposition e = scene.Parse();
  EXPECT_EQ(e.Value("gpudoctor_gpu_nvlink_errors_total", {{"gpu", "1"}, {"type", "replay"}}), 12);
  EXPECT_EQ(e.Value("gpudoctor_gpu_nvlink_active_links", Gpu(1)), 16);
  EXPECT_TRUE(e.Find("gpudoctor_gpu_nvlink_active_links", Gpu(2)).empty());
  EXPECT_EQ(e.Find("gpudoctor_gpu_nvlink_errors_total", Gpu(1)).size(), 4u);
}

TEST(Metrics, ALoweredPowerLimitShowsAgainstTheDefault) {
  Scene scene;
  scene.snapshot.gpus[1].power_limit_w = Field<double>::Value(500);
  scene.snapshot.gpus[1].power_default_limit_w = Field<double>::Value(700);
  const PromExposition e = scene.Parse();
  EXPECT_EQ(e.Value("gpudoctor_gpu_power_limit_watts", Gpu(1)), 500);
  EXPECT_EQ(e.Value("gpudoctor_gpu_power_default_limit_watts", Gpu(1)), 700);
}

TEST(Metrics, UnreachableGpuKeepsIdentityOnly) {
  Scene scene;
  scene.snapshot.gpus[4].access_error = AccessError::kGpuLost;
  const PromExposition e = scene.Parse();
  EXPECT_EQ(e.Value("gpudoctor_gpu_accessible", Gpu(4)), 0);
  EXPECT_EQ(e.Find("gpudoctor_gpu_info", Gpu(4)).size(), 1u);
  EXPECT_TRUE(e.Find("gpudoctor_gpu_temperature_celsius", Gpu(4)).empty());
  EXPECT_TRUE(e.Find("gpudoctor_gpu_memory_used_bytes", Gpu(4)).empty());
}

TEST(Metrics, FindingGaugeFollowsTheOpenSet) {
  Scene scene;
  scene.findings = SyntheticIncidents(scene.snapshot, kNow);
  PromExposition e = scene.Parse();
  EXPECT_EQ(e.Value("gpudoctor_finding", {{"id", "temperature_high"}, {"severity", "warning"}, {"gpu", "3"}}),
            1);
  EXPECT_EQ(
      e.Value("gpudoctor_finding", {{"id", "row_remap_pending"}, {"severity", "critical"}, {"gpu", "5"}}), 1);
  EXPECT_EQ(e.Value("gpudoctor_findings_open", {{"severity", "warning"}}), 2);
  EXPECT_EQ(e.Value("gpudoctor_findings_open", {{"severity", "critical"}}), 1);

  // Resolved: the series disappears rather than turning 0.
  std::erase_if(scene.findings, [](const StoredFinding& f) { return f.finding.id == "temperature_high"; });
  e = scene.Parse();
  EXPECT_TRUE(e.Find("gpudoctor_finding", {{"id", "temperature_high"}}).empty());
  EXPECT_EQ(e.Find("gpudoctor_finding").size(), 2u);
  EXPECT_EQ(e.Value("gpudoctor_findings_open", {{"severity", "warning"}}), 1);
}

TEST(Metrics, HostWideFindingsAndDuplicatesStayValid) {
  Scene scene;
  StoredFinding host{.key = "driver_version_mismatch",
                     .finding = {.id = "driver_version_mismatch", .severity = Severity::kCritical}};
  scene.findings = {host, host};
  const PromExposition e = scene.Parse();  // no repeated series
  EXPECT_EQ(e.Value("gpudoctor_finding", {{"id", "driver_version_mismatch"}, {"gpu", ""}}), 1);
}

TEST(Metrics, FindingsThatDifferOnlyBySubjectAreSeparateSeries) {
  Scene scene;
  StoredFinding first{.key = "training_stalled:2:llama-70b",
                      .finding = {.id = "training_stalled", .severity = Severity::kWarning, .gpu = GpuRef{2, ""},
                                  .subject = "llama-70b"}};
  StoredFinding second = first;
  second.key = "training_stalled:2:eval";
  second.finding.subject = "eval";
  scene.findings = {first, second};
  const PromExposition e = scene.Parse();
  EXPECT_EQ(e.Find("gpudoctor_finding").size(), 2u);
  EXPECT_EQ(e.Value("gpudoctor_finding", {{"id", "training_stalled"}, {"subject", "llama-70b"}}), 1);
  EXPECT_EQ(e.Value("gpudoctor_finding", {{"id", "training_stalled"}, {"subject", "eval"}}), 1);
  EXPECT_EQ(e.Value("gpudoctor_findings_open", {{"severity", "warning"}}), 2);
}

TEST(Metrics, ChecklistItemsSayWhetherTheyWereChecked) {
  Scene scene;
  scene.checklist = {{.title = "GPUs below their temperature limits", .checked = true, .severity = Severity::kWarning},
                     {.title = "Fans turning", .checked = true, .severity = Severity::kOk},
                     {.title = "Backups \"nightly\"", .checked = false, .unchecked_reason = "no backup \"paths\""}};
  const PromExposition e = scene.Parse();
  EXPECT_EQ(e.Find("gpudoctor_checklist_item").size(), 3u);
  EXPECT_EQ(e.Value("gpudoctor_checklist_item", {{"item", "GPUs below their temperature limits"},
                                                 {"state", "warning"}, {"reason", ""}}),
            1);
  EXPECT_EQ(e.Value("gpudoctor_checklist_item", {{"item", "Fans turning"}, {"state", "ok"}}), 1);
  EXPECT_EQ(e.Value("gpudoctor_checklist_item", {{"item", "Backups \"nightly\""}, {"state", "unchecked"},
                                                 {"reason", "no backup \"paths\""}, {"hostname", kSyntheticHostname}}),
            1);
}

TEST(Metrics, AgentHealthAndStaleSamples) {
  Scene scene;
  PromExposition e = scene.Parse();
  EXPECT_EQ(e.Value("gpudoctor_up"), 1);
  EXPECT_EQ(e.Value("gpudoctor_nvml_up"), 1);
  EXPECT_EQ(e.Value("gpudoctor_sample_age_seconds"), 2);
  EXPECT_EQ(e.Value("gpudoctor_samples_total"), 720);
  EXPECT_EQ(e.Value("gpudoctor_probe_hangs_total"), 2);
  EXPECT_EQ(e.Value("gpudoctor_start_time_seconds"), 1'714'564'800.0 - 3600);

  // Sampling stalled (a hung driver): readings go, gpudoctor_up says why.
  scene.status.last_sample_at = kNow - seconds(60);
  e = scene.Parse({.stale_after = seconds(15)});
  EXPECT_EQ(e.Value("gpudoctor_up"), 0);
  EXPECT_EQ(e.Value("gpudoctor_sample_age_seconds"), 60);
  EXPECT_EQ(e.Value("gpudoctor_probe_hangs_total"), 2);
  EXPECT_TRUE(e.Find("gpudoctor_gpu_temperature_celsius").empty());
  EXPECT_FALSE(e.families.contains("gpudoctor_nvml_up"));
  EXPECT_EQ(e.Find("gpudoctor_gpu_info").size(), 8u);
}

TEST(Metrics, HistoryStoreHealth) {
  Scene scene;
  EXPECT_FALSE(scene.Parse().families.contains("gpudoctor_store_ok"));  // no history kept

  scene.status.store = StoreHealth{.path = "/var/lib/gpudoctor/history.db"};
  PromExposition e = scene.Parse();
  EXPECT_EQ(e.Value("gpudoctor_store_ok"), 1);
  EXPECT_EQ(e.Value("gpudoctor_store_errors_total"), 0);
  EXPECT_EQ(e.Value("gpudoctor_store_queued"), 0);

  scene.status.store = StoreHealth{.ok = false,
                                   .errors_total = 5,
                                   .path = "/var/lib/gpudoctor/history.db",
                                   .last_error = "cannot write samples: database or disk is full",
                                   .queued = 640,
                                   .dropped_total = 20};
  e = scene.Parse();
  EXPECT_EQ(e.Value("gpudoctor_store_ok"), 0);
  EXPECT_EQ(e.Value("gpudoctor_store_errors_total"), 5);
  EXPECT_EQ(e.Value("gpudoctor_store_queued"), 640);
  EXPECT_EQ(e.Value("gpudoctor_store_dropped_total"), 20);
}

TEST(Metrics, BeforeTheFirstSample) {
  AgentStatus status;
  status.started_at = kNow;
  const std::string text = RenderPrometheusMetrics({.status = status, .now = kNow}, {});
  Result<PromExposition> e = ParsePrometheusText(text);
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_EQ(e->Value("gpudoctor_up"), 0);
  EXPECT_EQ(e->Value("gpudoctor_samples_total"), 0);
  EXPECT_TRUE(e->Find("gpudoctor_sample_age_seconds").empty());
}

TEST(Metrics, DcgmExporterNamesOnlyWhenAsked) {
  Scene scene;
  scene.status.xids = {{.gpu_index = 5, .count = 3, .last_xid = 63, .last_seen = kNow}};
  EXPECT_TRUE(scene.Parse().Find("DCGM_FI_DEV_GPU_TEMP").empty());

  const PromExposition e = scene.Parse({.dcgm_compatible = true});
  const std::vector<const PromSample*> temp = e.Find("DCGM_FI_DEV_GPU_TEMP", Gpu(0));
  ASSERT_EQ(temp.size(), 1u);
  const std::map<std::string, std::string> expected_labels = {{"gpu", "0"},
                                                              {"UUID", scene.snapshot.gpus[0].uuid.value()},
                                                              {"pci_bus_id", "00000000:18:00.0"},
                                                              {"device", "nvidia0"},
                                                              {"modelName", "NVIDIA H100 80GB HBM3"},
                                                              {"Hostname", kSyntheticHostname},
                                                              {"DCGM_FI_DRIVER_VERSION",
                                                               scene.snapshot.driver_version.value()}};
  EXPECT_EQ(temp[0]->labels, expected_labels);
  EXPECT_EQ(temp[0]->value, scene.snapshot.gpus[0].temperature_c.value());
  // dcgm-exporter's units: MiB, %, MHz.
  EXPECT_EQ(e.Value("DCGM_FI_DEV_FB_USED", Gpu(0)),
            std::floor(scene.snapshot.gpus[0].memory_used_bytes.value() / 1048576.0));
  EXPECT_EQ(e.Value("DCGM_FI_DEV_FB_TOTAL", Gpu(0)), 81920);
  EXPECT_EQ(e.Value("DCGM_FI_DEV_GPU_UTIL", Gpu(0)), scene.snapshot.gpus[0].utilization_gpu_percent.value());
  EXPECT_EQ(e.Value("DCGM_FI_DEV_SM_CLOCK", Gpu(0)), 1980);
  EXPECT_EQ(e.Value("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", Gpu(5)), 1);
  EXPECT_EQ(e.Value("DCGM_FI_DEV_XID_ERRORS", Gpu(5)), 63);
  EXPECT_EQ(e.Value("gpudoctor_gpu_xid_errors_total", Gpu(5)), 3);
  EXPECT_EQ(e.Value("gpudoctor_gpu_last_xid_code", Gpu(5)), 63);
  EXPECT_EQ(e.families.at("DCGM_FI_DEV_PCIE_REPLAY_COUNTER").type, "counter");
  EXPECT_TRUE(e.Find("DCGM_FI_DEV_FAN_SPEED").empty());  // no fans: no sample
}

// dcgm-exporter's main branch names the host label `hostname`; one name is
// written, never both. Without a driver version there is no version label.
TEST(Metrics, TheDcgmHostLabelFollowsTheOptionAndTheDriverVersionLabelNeedsAVersion) {
  Scene scene;
  scene.snapshot.driver_version = Field<std::string>::Failed("NVML_ERROR_UNKNOWN");
  const PromExposition e = scene.Parse({.dcgm_compatible = true, .dcgm_hostname_label = "hostname"});
  for (const std::string_view family : {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"}) {
    const std::vector<const PromSample*> samples = e.Find(family, Gpu(3));
    ASSERT_EQ(samples.size(), 1u) << family;
    EXPECT_EQ(samples[0]->labels.at("hostname"), kSyntheticHostname);
    EXPECT_EQ(samples[0]->labels.count("Hostname"), 0u);
    EXPECT_EQ(samples[0]->labels.count("DCGM_FI_DRIVER_VERSION"), 0u);
  }
}

// GPM's readings in gpudoctor's units and in DCGM's, the other new readings
// likewise; a GPU without them has no sample under either name.
TEST(Metrics, GpmAndEnergyEncoderDecoderReservedInBothNamesAndAbsentWithoutThem) {
  Scene scene;
  GpuSnapshot& gpu = scene.snapshot.gpus[2];
  gpu.gpm_supported.SetValue(true);
  gpu.gpm_graphics_active.SetValue(0.96);
  gpu.gpm_sm_active.SetValue(0.875);
  gpu.gpm_sm_occupancy.SetValue(0.385);
  gpu.gpm_tensor_active.SetValue(0.4925);
  gpu.gpm_fp64_active.SetValue(0.005);
  gpu.gpm_fp32_active.SetValue(0.21);
  gpu.gpm_fp16_active.SetValue(0.0775);
  gpu.gpm_dram_active.SetValue(0.51);
  gpu.gpm_pcie_tx_bytes_per_second.SetValue(1210.0 * 1048576);
  gpu.gpm_pcie_rx_bytes_per_second.SetValue(2350.0 * 1048576);
  gpu.gpm_nvlink_tx_bytes_per_second.SetValue(64000.0 * 1048576);
  gpu.gpm_nvlink_rx_bytes_per_second.SetValue(60800.0 * 1048576);
  gpu.gpm_nvlink_bytes_total.SetValue(987654321);
  gpu.total_energy_mj.SetValue(367200000);
  gpu.encoder_utilization_percent.SetValue(4);
  gpu.decoder_utilization_percent.SetValue(11);
  gpu.memory_reserved_bytes.SetValue(600ULL << 20);
  scene.snapshot.gpus[3].gpm_supported.SetValue(false);
  const PromExposition e = scene.Parse({.dcgm_compatible = true});

  const struct {
    std::string_view ours, dcgm;
    double ours_value, dcgm_value;
  } expected[] = {
      {"gpudoctor_gpu_graphics_engine_active_ratio", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.96, 0.96},
      {"gpudoctor_gpu_sm_active_ratio", "DCGM_FI_PROF_SM_ACTIVE", 0.875, 0.875},
      {"gpudoctor_gpu_sm_occupancy_ratio", "DCGM_FI_PROF_SM_OCCUPANCY", 0.385, 0.385},
      {"gpudoctor_gpu_tensor_active_ratio", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.4925, 0.4925},
      {"gpudoctor_gpu_fp64_active_ratio", "DCGM_FI_PROF_PIPE_FP64_ACTIVE", 0.005, 0.005},
      {"gpudoctor_gpu_fp32_active_ratio", "DCGM_FI_PROF_PIPE_FP32_ACTIVE", 0.21, 0.21},
      {"gpudoctor_gpu_fp16_active_ratio", "DCGM_FI_PROF_PIPE_FP16_ACTIVE", 0.0775, 0.0775},
      {"gpudoctor_gpu_dram_active_ratio", "DCGM_FI_PROF_DRAM_ACTIVE", 0.51, 0.51},
      {"gpudoctor_gpu_pcie_tx_bytes_per_second", "DCGM_FI_PROF_PCIE_TX_BYTES", 1210.0 * 1048576, 1210.0 * 1048576},
      {"gpudoctor_gpu_pcie_rx_bytes_per_second", "DCGM_FI_PROF_PCIE_RX_BYTES", 2350.0 * 1048576, 2350.0 * 1048576},
      {"gpudoctor_gpu_nvlink_tx_bytes_per_second", "DCGM_FI_PROF_NVLINK_TX_BYTES", 64000.0 * 1048576,
       64000.0 * 1048576},
      {"gpudoctor_gpu_nvlink_rx_bytes_per_second", "DCGM_FI_PROF_NVLINK_RX_BYTES", 60800.0 * 1048576,
       60800.0 * 1048576},
      // dcgm's name is the links' rate, sent and received, in whole MiB/s, as DCGM fills it.
      {"gpudoctor_gpu_nvlink_traffic_bytes_total", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 987654321, 64000 + 60800},
      {"gpudoctor_gpu_energy_joules_total", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 367200, 367200000},
      {"gpudoctor_gpu_encoder_utilization_ratio", "DCGM_FI_DEV_ENC_UTIL", 0.04, 4},
      {"gpudoctor_gpu_decoder_utilization_ratio", "DCGM_FI_DEV_DEC_UTIL", 0.11, 11},
      {"gpudoctor_gpu_memory_reserved_bytes", "DCGM_FI_DEV_FB_RESERVED", 600.0 * 1048576, 600},
  };
  for (const auto& reading : expected) {
    for (const auto& [family, value] :
         {std::pair{reading.ours, reading.ours_value}, std::pair{reading.dcgm, reading.dcgm_value}}) {
      EXPECT_DOUBLE_EQ(e.Value(family, Gpu(2)).value_or(-1), value) << family;
      EXPECT_EQ(e.Find(family).size(), 1u) << family << ": only GPU 2 has it, GPU 3 (no GPM) and the rest have none";
    }
  }
  EXPECT_EQ(e.families.at("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION").type, "counter");
  EXPECT_EQ(e.families.at("gpudoctor_gpu_nvlink_traffic_bytes_total").type, "counter");
  EXPECT_EQ(e.families.at("DCGM_FI_PROF_PCIE_TX_BYTES").type, "gauge");
}

// A counter that first appears at 1 hides the first Xid from increase():
// every GPU's series is there from the start, at 0.
TEST(Metrics, EveryGpuHasAnXidCounterFromTheStart) {
  Scene scene;
  scene.status.xids = {{.gpu_index = 5, .count = 1, .last_xid = 79, .last_seen = kNow}};
  const PromExposition e = scene.Parse({.dcgm_compatible = true});
  EXPECT_EQ(e.Find("gpudoctor_gpu_xid_errors_total").size(), scene.snapshot.gpus.size());
  EXPECT_EQ(e.Value("gpudoctor_gpu_xid_errors_total", Gpu(0)), 0);
  EXPECT_EQ(e.Value("gpudoctor_gpu_xid_errors_total", Gpu(5)), 1);
  EXPECT_EQ(e.Value("DCGM_FI_DEV_XID_ERRORS", Gpu(0)), 0) << "dcgm-exporter writes 0 for none yet";
  EXPECT_TRUE(e.Find("gpudoctor_gpu_last_xid_code", Gpu(0)).empty()) << "no code before the first Xid";

  Scene quiet;
  EXPECT_EQ(quiet.Parse().Find("gpudoctor_gpu_xid_errors_total").size(), quiet.snapshot.gpus.size());
}

TEST(Metrics, LabelValuesAreEscaped) {
  Scene scene;
  scene.snapshot.hostname = "odd\"host\\name\nline2";
  const PromExposition e = scene.Parse();
  EXPECT_EQ(e.Find("gpudoctor_gpu_temperature_celsius", {{"hostname", scene.snapshot.hostname}}).size(), 8u);
}

TEST(Metrics, AlertCounters) {
  Scene scene;
  scene.with_alerts = true;
  scene.alerts = {.sinks = {{"webhook", 4, 1}, {"exec", 2, 0}}, .suppressed = 7, .dropped = 0};
  const PromExposition e = scene.Parse();
  EXPECT_EQ(e.Value("gpudoctor_alerts_delivered_total", {{"sink", "webhook"}}), 4);
  EXPECT_EQ(e.Value("gpudoctor_alerts_failed_total", {{"sink", "webhook"}}), 1);
  EXPECT_EQ(e.Value("gpudoctor_alerts_suppressed_total"), 7);
}

// Everything at once: all families catalogued, counters named *_total.
std::string RenderEverything(bool dcgm) {
  Scene scene;
  scene.with_alerts = true;
  scene.alerts = {.sinks = {{"webhook", 1, 0}}};
  scene.status.xids = {{.gpu_index = 1, .count = 1, .last_xid = 79, .last_seen = kNow}};
  scene.status.store = StoreHealth{.ok = false, .errors_total = 3, .queued = 12, .dropped_total = 1};
  scene.checklist = {{.title = "Fans turning", .checked = false, .unchecked_reason = "no fans"}};
  scene.snapshot.gpus[0].fan_speeds_percent = Field<std::vector<uint32_t>>::Value({40, 45});
  scene.snapshot.gpus[0].retired_pages_sbe = Field<uint32_t>::Value(1);
  scene.findings = SyntheticIncidents(scene.snapshot, kNow);
  return scene.Render({.dcgm_compatible = dcgm,
                       .version = "1.2.3",
                       .build_labels = {{"commit", "0123abc"}, {"build_date", "2024-05-01T12:00:00Z"},
                                        {"compiler", "GNU 12.2.0"}, {"build_type", "Release"},
                                        {"diag_kernels", "memtest, burn: PTX ISA 7.8 for sm_80"}}});
}

TEST(Metrics, EveryFamilyIsCatalogued) {
  Result<PromExposition> e = ParsePrometheusText(RenderEverything(true));
  ASSERT_TRUE(e.ok()) << e.error().message;
  const std::vector<std::string_view> names = MetricFamilyNames();
  for (const auto& [name, family] : e->families) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    if (StartsWith(name, "gpudoctor_")) {
      EXPECT_EQ(family.type == "counter", EndsWith(name, "_total")) << name;
    }
  }
  EXPECT_EQ(e->Value("gpudoctor_build_info", {{"version", "1.2.3"}, {"commit", "0123abc"},
                                              {"build_date", "2024-05-01T12:00:00Z"}, {"compiler", "GNU 12.2.0"},
                                              {"build_type", "Release"},
                                              {"diag_kernels", "memtest, burn: PTX ISA 7.8 for sm_80"}}),
            1);
  EXPECT_EQ(e->Value("gpudoctor_gpu_fan_speed_ratio", {{"gpu", "0"}, {"fan", "1"}}), 0.45);
}

TEST(Metrics, NvmlStylePciBusId) {
  EXPECT_EQ(NvmlStylePciBusId("0000:3b:00.0"), "00000000:3B:00.0");
  EXPECT_EQ(NvmlStylePciBusId("0001:db:1f.7"), "00000001:DB:1F.7");
  EXPECT_EQ(NvmlStylePciBusId("garbage"), "garbage");
  EXPECT_EQ(NvmlStylePciBusId(""), "");
}

// Prometheus' own linter, where installed.
std::optional<std::string> FindPromtool() {
  for (const char* path : {"/usr/bin/promtool", "/usr/local/bin/promtool"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return std::nullopt;
}

TEST(Metrics, PromtoolAcceptsTheOutput) {
  std::optional<std::string> promtool = FindPromtool();
  if (!promtool) GTEST_SKIP() << "promtool is not installed";
  Result<ProcessOutcome> own = RunProcess({.argv = {*promtool, "check", "metrics"},
                                           .stdin_data = RenderEverything(false),
                                           .timeout = seconds(30)});
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_TRUE(own->Succeeded()) << own->output;  // parses and passes every lint

  // dcgm-exporter's names break Prometheus naming lints on purpose (counters
  // without _total, units in HELP only), but must still parse.
  Result<ProcessOutcome> dcgm = RunProcess({.argv = {*promtool, "check", "metrics"},
                                            .stdin_data = RenderEverything(true),
                                            .timeout = seconds(30)});
  ASSERT_TRUE(dcgm.ok()) << dcgm.error().message;
  EXPECT_EQ(dcgm->output.find("error while linting"), std::string::npos) << dcgm->output;
  for (std::string_view line : Split(dcgm->output, '\n')) {
    if (Trim(line).empty()) continue;
    EXPECT_TRUE(StartsWith(line, "DCGM_FI_")) << "lint beyond the dcgm names: " << line;
  }
}

}  // namespace
}  // namespace gpudoctor
