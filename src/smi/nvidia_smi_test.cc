#include "smi/nvidia_smi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/text.h"
#include "smi/smi_test_util.h"

namespace gpudoctor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr uint64_t kMiB = 1ull << 20;

// The shared corpus and the other captures are in testdata/nvidia_smi; the
// public reports added beyond the corpus are in testdata/health/nvidia_smi.
std::string FixturePath(std::string_view name, std::string_view folder = "testdata/nvidia_smi") {
  return std::string(GPUDOCTOR_SOURCE_DIR) + "/" + std::string(folder) + "/" + std::string(name);
}

std::string ReadFixture(std::string_view name) {
  std::ifstream file(FixturePath(name), std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The fixture parsed; an empty snapshot (and a test failure) when it does not parse.
Snapshot Fixture(std::string_view name, std::string_view folder = "testdata/nvidia_smi") {
  Result<Snapshot> snapshot = ReadNvidiaSmiFile(FixturePath(name, folder));
  if (!snapshot) {
    ADD_FAILURE() << name << ": " << snapshot.error().message;
    return {};
  }
  return std::move(snapshot).value();
}

Snapshot Parse(std::string_view text) {
  Result<Snapshot> snapshot = ParseNvidiaSmi(text, "test");
  if (!snapshot) {
    ADD_FAILURE() << snapshot.error().message;
    return {};
  }
  return std::move(snapshot).value();
}

std::string ParseError(std::string_view text) {
  Result<Snapshot> snapshot = ParseNvidiaSmi(text, "test");
  if (snapshot) {
    ADD_FAILURE() << "parsed, expected an error";
    return "";
  }
  return snapshot.error().message;
}

std::string Iso(WallTime time) { return FormatIsoUtc(time); }

MATCHER_P3(IsProcess, pid, name, used_mib, "") {
  return arg.pid == static_cast<uint32_t>(pid) && arg.name == name && arg.used_memory_bytes.has_value() &&
         arg.used_memory_bytes.value() == static_cast<uint64_t>(used_mib) * kMiB;
}

// ---- The captured corpus: each file's "# expected:" fault ----------------------

TEST(NvidiaSmiCorpusTest, Handle001UnknownErrorBecomesGpuAccessError) {
  Snapshot snapshot = Fixture("001.txt");
  EXPECT_THAT(snapshot.source, StartsWith("nvidia-smi:"));
  EXPECT_THAT(snapshot.source, HasSubstr("001.txt"));
  EXPECT_EQ(snapshot.driver_error, AccessError::kNone);
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.index, 0u);
  EXPECT_THAT(gpu.pci_bus_id, HasValue(std::string("0000:05:00.0")));
  EXPECT_EQ(gpu.access_error, AccessError::kUnknown);
  EXPECT_EQ(gpu.access_message, "Unable to determine the device handle for GPU 0000:05:00.0: Unknown Error");
  EXPECT_THAT(gpu.temperature_c, IsNotSupported());
}

TEST(NvidiaSmiCorpusTest, Nvml005VersionMismatchWithLibraryVersion) {
  Snapshot snapshot = Fixture("005.txt");
  EXPECT_EQ(snapshot.driver_error, AccessError::kVersionMismatch);
  EXPECT_EQ(snapshot.driver_message, "Failed to initialize NVML: Driver/library version mismatch");
  EXPECT_THAT(snapshot.nvml_version, HasValue(std::string("570.124")));
  EXPECT_THAT(snapshot.gpus, IsEmpty());
  EXPECT_THAT(snapshot.device_count, IsNotSupported());
}

TEST(NvidiaSmiCorpusTest, Driver008CouldNotCommunicate) {
  Snapshot snapshot = Fixture("008.txt");
  EXPECT_EQ(snapshot.driver_error, AccessError::kDriverNotLoaded);
  EXPECT_THAT(snapshot.driver_message, StartsWith("NVIDIA-SMI has failed because it couldn't communicate"));
  EXPECT_THAT(snapshot.gpus, IsEmpty());
}

TEST(NvidiaSmiCorpusTest, Table009FanErrOnGpu14Only) {
  Snapshot snapshot = Fixture("009.txt");
  ASSERT_THAT(snapshot.gpus, SizeIs(2));
  const GpuSnapshot& healthy = snapshot.gpus[0];
  EXPECT_EQ(healthy.index, 13u);
  EXPECT_THAT(healthy.pci_bus_id, HasValue(std::string("0000:c9:00.0")));
  EXPECT_THAT(healthy.name, HasValue(std::string("NVIDIA RTX 4000 Ada Gene...")));
  EXPECT_THAT(healthy.fan_speeds_percent, HasValue(std::vector<uint32_t>{30}));
  EXPECT_THAT(healthy.temperature_c, HasValue(33u));
  EXPECT_THAT(healthy.power_draw_w, HasValue(4.0));
  EXPECT_THAT(healthy.power_limit_w, HasValue(130.0));
  EXPECT_THAT(healthy.memory_used_bytes, HasValue(1 * kMiB));
  EXPECT_THAT(healthy.memory_total_bytes, HasValue(20475 * kMiB));
  EXPECT_THAT(healthy.utilization_gpu_percent, HasValue(0u));
  EXPECT_THAT(healthy.persistence_mode, HasValue(true));
  EXPECT_THAT(healthy.ecc_enabled, HasValue(false));  // "Off" in the ECC column
  EXPECT_THAT(healthy.ecc_volatile_uncorrected, IsNotSupported());

  const GpuSnapshot& faulty = snapshot.gpus[1];
  EXPECT_EQ(faulty.index, 14u);
  EXPECT_THAT(faulty.pci_bus_id, HasValue(std::string("0000:cc:00.0")));
  EXPECT_THAT(faulty.fan_speeds_percent, FailedWith("ERR!"));
  EXPECT_THAT(faulty.temperature_c, HasValue(68u));
  EXPECT_THAT(faulty.power_draw_w, HasValue(99.0));
  EXPECT_THAT(faulty.utilization_gpu_percent, HasValue(93u));
  // An excerpt: no header, no process table.
  EXPECT_THAT(snapshot.driver_version, IsNotSupported());
  EXPECT_THAT(faulty.processes, IsNotSupported());
}

TEST(NvidiaSmiCorpusTest, Query011RemappedRowsPending) {
  Snapshot snapshot = Fixture("011.txt");
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.index, 0u);
  EXPECT_THAT(gpu.remapped_rows_correctable, HasValue(0u));
  EXPECT_THAT(gpu.remapped_rows_uncorrectable, HasValue(4u));
  EXPECT_THAT(gpu.remapped_rows_pending, HasValue(true));
  EXPECT_THAT(gpu.remapped_rows_failure, IsNotSupported());
  EXPECT_THAT(gpu.pci_bus_id, IsNotSupported());
}

TEST(NvidiaSmiCorpusTest, Query012TemperatureThresholds) {
  Snapshot snapshot = Fixture("012.txt");
  EXPECT_EQ(Iso(snapshot.taken_at), "2021-05-08T13:25:04.000Z");
  EXPECT_THAT(snapshot.driver_version, HasValue(std::string("465.27")));
  EXPECT_THAT(snapshot.cuda_driver_version, HasValue(11030));
  EXPECT_THAT(snapshot.device_count, HasValue(1u));
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_THAT(gpu.pci_bus_id, HasValue(std::string("0000:2d:00.0")));
  EXPECT_THAT(gpu.temperature_c, HasValue(56u));
  EXPECT_THAT(gpu.temperature_max_operating_c, HasValue(57u));
  EXPECT_THAT(gpu.temperature_slowdown_c, HasValue(97u));
  EXPECT_THAT(gpu.temperature_shutdown_c, HasValue(102u));
  EXPECT_THAT(gpu.memory_temperature_c, IsNotSupported());
}

TEST(NvidiaSmiCorpusTest, Csv014DefaultPowerLimitUnknownErrorIsAFailedReading) {
  Snapshot snapshot = Fixture("014.txt");
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.index, 0u);
  EXPECT_THAT(gpu.name, HasValue(std::string("GeForce RTX 2080 Ti")));
  EXPECT_THAT(gpu.utilization_gpu_percent, HasValue(100u));
  EXPECT_THAT(gpu.utilization_memory_percent, HasValue(37u));
  EXPECT_THAT(gpu.temperature_c, HasValue(56u));
  EXPECT_THAT(gpu.power_draw_w, HasValue(228.82));
  EXPECT_THAT(gpu.power_limit_w, HasValue(210.0));
  EXPECT_THAT(gpu.power_default_limit_w, FailedWith("[Unknown Error]"));
  EXPECT_THAT(gpu.fan_speeds_percent, HasValue(std::vector<uint32_t>{56}));
  EXPECT_THAT(gpu.memory_clock_mhz, HasValue(6800u));
  EXPECT_THAT(gpu.sm_clock_mhz, IsNotSupported());  // the graphics clock is a different clock
}

TEST(NvidiaSmiCorpusTest, Csv015EightHealthyGpusFromTheCommandLineColumns) {
  Snapshot snapshot = Fixture("015.txt");
  struct Expected {
    const char* uuid;
    uint32_t temperature;
    uint32_t utilization;
    uint64_t used_mib;
  };
  const Expected expected[] = {
      {"GPU-004f693d-767b-b215-b4a9-a18af0ffd643", 25, 0, 802},
      {"GPU-86fe97db-bf54-a056-4e8d-9b07e1a298e7", 54, 86, 10032},
      {"GPU-2090c509-a97a-e2fe-68f4-cf9e874c36f2", 55, 85, 6442},
      {"GPU-f0e47078-b19f-a3ff-bf2e-03a4c5fe3c2a", 58, 60, 6442},
      {"GPU-637ac0be-f0e1-b056-bf28-b2c046e5e17e", 55, 84, 6459},
      {"GPU-4168500a-bee8-3b4d-ba1b-75289a4afdcd", 54, 83, 6440},
      {"GPU-92ce5025-17c0-7c83-d2eb-a697262d4c46", 56, 83, 6451},
      {"GPU-f199c9ea-65d8-5382-aefe-a9e8fb48057b", 55, 82, 6442},
  };
  ASSERT_THAT(snapshot.gpus, SizeIs(8));
  for (uint32_t i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    const GpuSnapshot& gpu = snapshot.gpus[i];
    EXPECT_EQ(gpu.index, i);
    EXPECT_THAT(gpu.uuid, HasValue(std::string(expected[i].uuid)));
    EXPECT_THAT(gpu.name, HasValue(std::string("GeForce GTX TITAN X")));
    EXPECT_THAT(gpu.temperature_c, HasValue(expected[i].temperature));
    EXPECT_THAT(gpu.utilization_gpu_percent, HasValue(expected[i].utilization));
    EXPECT_THAT(gpu.memory_used_bytes, HasValue(expected[i].used_mib * kMiB));
    EXPECT_THAT(gpu.memory_total_bytes, HasValue(12206 * kMiB));
    EXPECT_EQ(gpu.access_error, AccessError::kNone);
  }
}

TEST(NvidiaSmiCorpusTest, Table018VolatileUncorrectableEcc) {
  Snapshot snapshot = Fixture("018.txt");
  EXPECT_EQ(Iso(snapshot.taken_at), "2024-10-25T11:35:11.000Z");
  EXPECT_THAT(snapshot.driver_version, HasValue(std::string("535.129.03")));
  EXPECT_THAT(snapshot.cuda_driver_version, HasValue(12020));
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.index, 0u);
  EXPECT_THAT(gpu.pci_bus_id, HasValue(std::string("0000:1a:00.0")));
  EXPECT_THAT(gpu.name, HasValue(std::string("NVIDIA H100 80GB HBM3")));
  EXPECT_THAT(gpu.ecc_volatile_uncorrected, HasValue(uint64_t{2}));
  EXPECT_THAT(gpu.ecc_enabled, HasValue(true));
  EXPECT_THAT(gpu.persistence_mode, HasValue(true));
  EXPECT_THAT(gpu.fan_speeds_percent, IsNotSupported());
  EXPECT_THAT(gpu.temperature_c, HasValue(33u));
  EXPECT_THAT(gpu.power_draw_w, HasValue(71.0));
  EXPECT_THAT(gpu.power_limit_w, HasValue(700.0));
  EXPECT_THAT(gpu.memory_used_bytes, HasValue(4 * kMiB));
  EXPECT_THAT(gpu.memory_total_bytes, HasValue(81559 * kMiB));
  EXPECT_THAT(gpu.utilization_gpu_percent, HasValue(0u));
}

Snapshot HealthFixture(std::string_view name) { return Fixture(name, "testdata/health/nvidia_smi"); }

TEST(NvidiaSmiListsTest, NvlinkStatus101InactiveLinksAreLinksDown) {
  Snapshot snapshot = HealthFixture("101.txt");
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.index, 3u);
  EXPECT_THAT(gpu.name, HasValue(std::string("Tesla V100-SXM2-32GB")));
  EXPECT_FALSE(gpu.uuid.has_value()) << "the poster elided the UUID";
  ASSERT_TRUE(gpu.nvlinks.has_value());
  ASSERT_THAT(gpu.nvlinks.value(), SizeIs(6));
  std::vector<uint32_t> inactive;
  for (const NvLinkInfo& link : gpu.nvlinks.value())
    if (!link.active.value()) inactive.push_back(link.link);
  EXPECT_EQ(inactive, (std::vector<uint32_t>{3, 5}));
}

TEST(NvidiaSmiListsTest, NvlinkStatus105AllLinksInactiveIsAKnownListWithNoneUp) {
  Snapshot snapshot = HealthFixture("105.txt");
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.index, 6u);
  EXPECT_THAT(gpu.name, HasValue(std::string("NVIDIA A100-SXM4-80GB")));
  ASSERT_TRUE(gpu.nvlinks.has_value()) << "the links are known: none is up";
  EXPECT_THAT(gpu.nvlinks.value(), SizeIs(0));
}

// Newer drivers capitalise it: "all links are inActive" (seen in leptonai/gpud#1085, a B200's nvlink status).
TEST(NvidiaSmiListsTest, AllLinksInactiveIsReadWhateverItsCase) {
  auto snapshot = ParseNvidiaSmi(
      "GPU 2: NVIDIA B200 (UUID: GPU-xxx)\nNVML: Unable to retrieve NVLink information as all links are inActive\n",
      "inline");
  ASSERT_TRUE(snapshot.ok()) << snapshot.error().message;
  ASSERT_THAT(snapshot->gpus, SizeIs(1));
  ASSERT_TRUE(snapshot->gpus[0].nvlinks.has_value());
  EXPECT_THAT(snapshot->gpus[0].nvlinks.value(), SizeIs(0));
}

TEST(NvidiaSmiTopologyTest, EscapeSequencesOfAColourTerminalAreDropped) {
  // 106.txt: topo -m whose header nvidia-smi underlined (ESC [4m ... ESC [0m).
  Snapshot underlined = HealthFixture("106.txt");
  ASSERT_THAT(underlined.gpus, SizeIs(1));
  // The same list with colour codes around a GPU line, and a sequence cut at the very end.
  const std::string plain = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-27806f02-cd3c-d2f5-f0c5-dae4dee3906a)\n"
                            "\t Link 0: <inactive>\n";
  const std::string coloured = "\x1b[1mGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-27806f02-cd3c-d2f5-f0c5-dae4dee3906a)"
                               "\x1b[0m\n\t Link 0: \x1b[31m<inactive>\x1b[0m\n\x1b[";
  for (const std::string& text : {plain, coloured}) {
    Snapshot snapshot = Parse(text);
    ASSERT_THAT(snapshot.gpus, SizeIs(1));
    EXPECT_THAT(snapshot.gpus[0].name, HasValue(std::string("NVIDIA H100 80GB HBM3")));
    ASSERT_TRUE(snapshot.gpus[0].nvlinks.has_value());
    ASSERT_THAT(snapshot.gpus[0].nvlinks.value(), SizeIs(1));
    EXPECT_THAT(snapshot.gpus[0].nvlinks.value()[0].active, HasValue(false));
  }
}

TEST(NvidiaSmiListsTest, ListGivesIndexNameAndUuid) {
  Snapshot snapshot = Parse(
      "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-27806f02-cd3c-d2f5-f0c5-dae4dee3906a)\n"
      "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-4bd6a6f0-52b8-7c84-0dc5-2ab4a6c1c8d2)\n");
  ASSERT_THAT(snapshot.gpus, SizeIs(2));
  EXPECT_THAT(snapshot.gpus[1].uuid, HasValue(std::string("GPU-4bd6a6f0-52b8-7c84-0dc5-2ab4a6c1c8d2")));
  EXPECT_FALSE(snapshot.gpus[1].nvlinks.has_value()) << "-L says nothing of the links";
}

TEST(NvidiaSmiListsTest, DebugDump103GpuItCouldNotOpenIsAnAccessError) {
  Snapshot snapshot = HealthFixture("103.txt");
  EXPECT_THAT(snapshot.device_count, HasValue(2u));
  ASSERT_THAT(snapshot.gpus, SizeIs(2));
  EXPECT_THAT(snapshot.gpus[0].name, HasValue(std::string("NVIDIA A10")));
  EXPECT_EQ(snapshot.gpus[0].access_error, AccessError::kNone);
  EXPECT_EQ(snapshot.gpus[1].index, 1u);
  EXPECT_EQ(snapshot.gpus[1].access_error, AccessError::kUnknown);
  EXPECT_THAT(snapshot.incomplete_reasons, IsEmpty());
}

TEST(NvidiaSmiListsTest, InforomWarning102MarksTheGpuItNames) {
  Snapshot snapshot = HealthFixture("102.txt");
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  EXPECT_THAT(snapshot.gpus[0].inforom_valid, HasValue(false));
  EXPECT_THAT(snapshot.gpus[0].temperature_c, HasValue(35u)) << "the table above it still reads";
}

// ---- Full reports in each format ---------------------------------------------------

TEST(NvidiaSmiXmlTest, H100PairEveryMappedField) {
  Snapshot snapshot = Fixture("h100_x2_q.xml");
  EXPECT_EQ(Iso(snapshot.taken_at), "2024-06-11T09:42:17.000Z");
  EXPECT_THAT(snapshot.driver_version, HasValue(std::string("555.42.06")));
  EXPECT_THAT(snapshot.cuda_driver_version, HasValue(12050));
  EXPECT_THAT(snapshot.device_count, HasValue(2u));
  EXPECT_EQ(snapshot.driver_error, AccessError::kNone);
  ASSERT_THAT(snapshot.gpus, SizeIs(2));

  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.index, 0u);
  EXPECT_THAT(gpu.name, HasValue(std::string("NVIDIA H100 80GB HBM3")));
  EXPECT_THAT(gpu.uuid, HasValue(std::string("GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1")));
  EXPECT_THAT(gpu.serial, HasValue(std::string("1654423001593")));
  EXPECT_THAT(gpu.board_part_number, HasValue(std::string("692-2G520-0200-000")));
  EXPECT_THAT(gpu.vbios_version, HasValue(std::string("96.00.99.00.01")));
  EXPECT_THAT(gpu.persistence_mode, HasValue(true));
  EXPECT_THAT(gpu.pci_bus_id, HasValue(std::string("0000:18:00.0")));
  EXPECT_THAT(gpu.pcie_generation_current, HasValue(5u));
  EXPECT_THAT(gpu.pcie_generation_max, HasValue(5u));
  EXPECT_THAT(gpu.pcie_width_current, HasValue(16u));
  EXPECT_THAT(gpu.pcie_width_max, HasValue(16u));
  EXPECT_THAT(gpu.pcie_replay_count, HasValue(uint64_t{0}));
  EXPECT_THAT(gpu.temperature_c, HasValue(58u));
  EXPECT_THAT(gpu.memory_temperature_c, HasValue(66u));
  // This driver prints T.Limit margins, not absolute thresholds.
  EXPECT_THAT(gpu.temperature_slowdown_c, IsNotSupported());
  EXPECT_THAT(gpu.temperature_shutdown_c, IsNotSupported());
  EXPECT_THAT(gpu.temperature_max_operating_c, IsNotSupported());
  EXPECT_THAT(gpu.fan_speeds_percent, IsNotSupported());
  EXPECT_THAT(gpu.power_draw_w, HasValue(612.45));  // the average, as NVML reports it
  EXPECT_THAT(gpu.power_limit_w, HasValue(700.0));
  EXPECT_THAT(gpu.power_default_limit_w, HasValue(700.0));  // not the module's N/A
  EXPECT_THAT(gpu.sm_clock_mhz, HasValue(1980u));
  EXPECT_THAT(gpu.memory_clock_mhz, HasValue(2619u));
  EXPECT_THAT(gpu.clock_event_reasons, HasValue(uint64_t{0}));
  EXPECT_THAT(gpu.utilization_gpu_percent, HasValue(97u));
  EXPECT_THAT(gpu.utilization_memory_percent, HasValue(41u));
  EXPECT_THAT(gpu.memory_total_bytes, HasValue(81559 * kMiB));
  EXPECT_THAT(gpu.memory_used_bytes, HasValue(61790 * kMiB));
  EXPECT_THAT(gpu.memory_free_bytes, HasValue(19315 * kMiB));
  ASSERT_TRUE(gpu.processes.has_value());
  EXPECT_THAT(gpu.processes.value(), ElementsAre(IsProcess(48213, "/opt/conda/bin/python3.10", 61234)));
  EXPECT_THAT(gpu.ecc_enabled, HasValue(true));
  EXPECT_THAT(gpu.ecc_volatile_corrected, HasValue(uint64_t{0}));
  EXPECT_THAT(gpu.ecc_volatile_uncorrected, HasValue(uint64_t{0}));
  EXPECT_THAT(gpu.ecc_aggregate_corrected, HasValue(uint64_t{0}));
  EXPECT_THAT(gpu.ecc_aggregate_uncorrected, HasValue(uint64_t{0}));
  EXPECT_THAT(gpu.retired_pages_sbe, IsNotSupported());
  EXPECT_THAT(gpu.retired_pages_dbe, IsNotSupported());
  EXPECT_THAT(gpu.retired_pages_pending, IsNotSupported());
  EXPECT_THAT(gpu.remapped_rows_correctable, HasValue(0u));
  EXPECT_THAT(gpu.remapped_rows_uncorrectable, HasValue(0u));
  EXPECT_THAT(gpu.remapped_rows_pending, HasValue(false));
  EXPECT_THAT(gpu.remapped_rows_failure, HasValue(false));
  EXPECT_THAT(gpu.nvlinks, IsNotSupported());
  EXPECT_EQ(gpu.access_error, AccessError::kNone);

  const GpuSnapshot& sick = snapshot.gpus[1];
  EXPECT_EQ(sick.index, 1u);
  EXPECT_THAT(sick.pci_bus_id, HasValue(std::string("0000:2a:00.0")));
  EXPECT_THAT(sick.uuid, HasValue(std::string("GPU-7c3cadbd-17e5-0913-f69b-c618122ea0cd")));
  EXPECT_THAT(sick.pcie_generation_current, HasValue(4u));
  EXPECT_THAT(sick.pcie_width_current, HasValue(8u));
  EXPECT_THAT(sick.pcie_replay_count, HasValue(uint64_t{214}));
  EXPECT_THAT(sick.clock_event_reasons,
              HasValue(clock_event::kHwSlowdown | clock_event::kHwThermalSlowdown));
  EXPECT_THAT(sick.temperature_c, HasValue(87u));
  EXPECT_THAT(sick.memory_temperature_c, HasValue(95u));
  EXPECT_THAT(sick.power_draw_w, HasValue(301.10));
  EXPECT_THAT(sick.sm_clock_mhz, HasValue(1095u));
  EXPECT_THAT(sick.ecc_volatile_corrected, HasValue(uint64_t{5}));
  EXPECT_THAT(sick.ecc_volatile_uncorrected, HasValue(uint64_t{1}));
  EXPECT_THAT(sick.ecc_aggregate_corrected, HasValue(uint64_t{19}));  // SRAM 2 + DRAM 17
  EXPECT_THAT(sick.ecc_aggregate_uncorrected, HasValue(uint64_t{1}));
  EXPECT_THAT(sick.remapped_rows_uncorrectable, HasValue(1u));
  EXPECT_THAT(sick.remapped_rows_pending, HasValue(true));
  ASSERT_TRUE(sick.processes.has_value());
  EXPECT_THAT(sick.processes.value(), ElementsAre(IsProcess(48214, "/opt/conda/bin/python3.10", 39970),
                                                  IsProcess(51002, "nvidia-cuda-mps-server", 30)));
}

TEST(NvidiaSmiXmlTest, P100OnDriver418UsesTheOlderElementNames) {
  Snapshot snapshot = Fixture("p100_418_q.xml");
  EXPECT_EQ(Iso(snapshot.taken_at), "2020-02-03T17:08:44.000Z");
  EXPECT_THAT(snapshot.driver_version, HasValue(std::string("418.87.01")));
  EXPECT_THAT(snapshot.cuda_driver_version, HasValue(10010));
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_THAT(gpu.name, HasValue(std::string("Tesla P100-PCIE-16GB")));
  EXPECT_THAT(gpu.persistence_mode, HasValue(false));
  EXPECT_THAT(gpu.board_part_number, IsNotSupported());
  EXPECT_THAT(gpu.pci_bus_id, HasValue(std::string("0000:04:00.0")));
  EXPECT_THAT(gpu.pcie_replay_count, HasValue(uint64_t{3}));
  EXPECT_THAT(gpu.clock_event_reasons, HasValue(clock_event::kSwPowerCap));  // <clocks_throttle_reasons>
  EXPECT_THAT(gpu.ecc_volatile_corrected, HasValue(uint64_t{0}));            // single_bit/total
  EXPECT_THAT(gpu.ecc_volatile_uncorrected, HasValue(uint64_t{2}));          // double_bit/total
  EXPECT_THAT(gpu.ecc_aggregate_corrected, HasValue(uint64_t{7}));
  EXPECT_THAT(gpu.ecc_aggregate_uncorrected, HasValue(uint64_t{2}));
  EXPECT_THAT(gpu.retired_pages_sbe, HasValue(3u));
  EXPECT_THAT(gpu.retired_pages_dbe, HasValue(2u));
  EXPECT_THAT(gpu.retired_pages_pending, HasValue(true));
  EXPECT_THAT(gpu.remapped_rows_uncorrectable, IsNotSupported());
  EXPECT_THAT(gpu.temperature_c, HasValue(41u));
  EXPECT_THAT(gpu.temperature_shutdown_c, HasValue(85u));
  EXPECT_THAT(gpu.temperature_slowdown_c, HasValue(82u));
  EXPECT_THAT(gpu.temperature_max_operating_c, IsNotSupported());
  EXPECT_THAT(gpu.power_draw_w, HasValue(249.37));
  EXPECT_THAT(gpu.power_limit_w, HasValue(250.0));
  EXPECT_THAT(gpu.power_default_limit_w, HasValue(250.0));
  EXPECT_THAT(gpu.sm_clock_mhz, HasValue(1189u));
  EXPECT_THAT(gpu.memory_clock_mhz, HasValue(715u));
  EXPECT_THAT(gpu.memory_free_bytes, HasValue(1173 * kMiB));
  ASSERT_TRUE(gpu.processes.has_value());
  EXPECT_THAT(gpu.processes.value(), ElementsAre(IsProcess(2217, "./train_resnet", 15097)));
}

TEST(NvidiaSmiXmlTest, TruncatedLogKeepsWhatWasWritten) {
  const std::string xml = ReadFixture("h100_x2_q.xml");
  const size_t cut = xml.find("<gpu_temp>87 C</gpu_temp>");
  ASSERT_NE(cut, std::string::npos);
  Snapshot snapshot = Parse(std::string_view(xml).substr(0, cut));
  ASSERT_THAT(snapshot.gpus, SizeIs(2));
  EXPECT_THAT(snapshot.gpus[0].temperature_c, HasValue(58u));
  EXPECT_THAT(snapshot.gpus[0].processes, HasValue(SizeIs(1)));
  EXPECT_THAT(snapshot.gpus[1].remapped_rows_pending, HasValue(true));
  EXPECT_THAT(snapshot.gpus[1].temperature_c, IsNotSupported());
}

TEST(NvidiaSmiXmlTest, OneLineXmlIsNotSkippedAsAnOverlongLine) {
  std::string xml = ReadFixture("h100_x2_q.xml");
  for (char& c : xml) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  xml.append(70 * 1024, ' ');
  Snapshot snapshot = Parse(xml);
  ASSERT_THAT(snapshot.gpus, SizeIs(2));
  EXPECT_THAT(snapshot.gpus[1].ecc_volatile_uncorrected, HasValue(uint64_t{1}));
}

TEST(NvidiaSmiXmlTest, InstantPowerStandsInWhenTheAverageIsMissing) {
  Snapshot snapshot = Parse(R"(<nvidia_smi_log><gpu id="00000000:01:00.0"><gpu_power_readings>
      <average_power_draw>N/A</average_power_draw><instant_power_draw>2.81 W</instant_power_draw>
      </gpu_power_readings><processes></processes></gpu></nvidia_smi_log>)");
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  EXPECT_THAT(snapshot.gpus[0].power_draw_w, HasValue(2.81));
  EXPECT_THAT(snapshot.gpus[0].processes, HasValue(IsEmpty()));
  EXPECT_THAT(snapshot.device_count, IsNotSupported());
}

TEST(NvidiaSmiPowerLimitTest, DefaultLimitInEveryNamingFormat) {
  // -q text: the pre-535 "Power Readings" and the newer "GPU Power Readings" sections.
  Snapshot old_text = Parse(
      "GPU 00000000:07:00.0\n"
      "    Power Readings\n"
      "        Power Limit                       : 300.00 W\n"
      "        Default Power Limit               : 350.00 W\n");
  ASSERT_THAT(old_text.gpus, SizeIs(1));
  EXPECT_THAT(old_text.gpus[0].power_limit_w, HasValue(300.0));
  EXPECT_THAT(old_text.gpus[0].power_default_limit_w, HasValue(350.0));

  Snapshot new_text = Parse(
      "GPU 00000000:07:00.0\n"
      "    GPU Power Readings\n"
      "        Current Power Limit               : 700.00 W\n"
      "        Default Power Limit               : N/A\n"
      "GPU 00000000:0F:00.0\n"
      "    GPU Power Readings\n"
      "        Default Power Limit               : [Unknown Error]\n");
  ASSERT_THAT(new_text.gpus, SizeIs(2));
  EXPECT_THAT(new_text.gpus[0].power_default_limit_w, IsNotSupported());
  EXPECT_THAT(new_text.gpus[1].power_default_limit_w, FailedWith("[Unknown Error]"));

  Snapshot xml = Parse(R"(<nvidia_smi_log><gpu id="00000000:01:00.0"><power_readings>
      <default_power_limit>ERR!</default_power_limit></power_readings></gpu>
      <gpu id="00000000:02:00.0"><gpu_power_readings><default_power_limit>N/A</default_power_limit>
      </gpu_power_readings></gpu></nvidia_smi_log>)");
  ASSERT_THAT(xml.gpus, SizeIs(2));
  EXPECT_THAT(xml.gpus[0].power_default_limit_w, FailedWith("ERR!"));
  EXPECT_THAT(xml.gpus[1].power_default_limit_w, IsNotSupported());

  Snapshot csv = Parse("index, power.default_limit [W]\n0, 450.00 W\n1, [N/A]\n2, [Unknown Error]\n");
  ASSERT_THAT(csv.gpus, SizeIs(3));
  EXPECT_THAT(csv.gpus[0].power_default_limit_w, HasValue(450.0));
  EXPECT_THAT(csv.gpus[1].power_default_limit_w, IsNotSupported());
  EXPECT_THAT(csv.gpus[2].power_default_limit_w, FailedWith("[Unknown Error]"));
}

TEST(NvidiaSmiPowerLimitTest, TheTableHasNoDefaultLimit) {
  Snapshot table = Fixture("table_h100_x4_processes.txt");
  ASSERT_FALSE(table.gpus.empty());
  for (const GpuSnapshot& gpu : table.gpus) {
    EXPECT_TRUE(gpu.power_limit_w.has_value()) << gpu.index;
    EXPECT_THAT(gpu.power_default_limit_w, IsNotSupported()) << gpu.index;
  }
}

TEST(NvidiaSmiQueryTextTest, A100OnDriver525EveryMappedField) {
  Snapshot snapshot = Fixture("a100_525_q.txt");
  EXPECT_EQ(Iso(snapshot.taken_at), "2023-03-01T14:03:52.000Z");
  EXPECT_THAT(snapshot.driver_version, HasValue(std::string("525.85.12")));
  EXPECT_THAT(snapshot.cuda_driver_version, HasValue(12000));
  EXPECT_THAT(snapshot.device_count, HasValue(1u));
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.index, 0u);
  EXPECT_THAT(gpu.name, HasValue(std::string("NVIDIA A100-SXM4-80GB")));
  EXPECT_THAT(gpu.uuid, HasValue(std::string("GPU-5d1c8a3e-27f4-9b6a-0c3d-e81f47a9b205")));
  EXPECT_THAT(gpu.serial, HasValue(std::string("1324021045983")));
  EXPECT_THAT(gpu.board_part_number, HasValue(std::string("692-2G506-0212-002")));
  EXPECT_THAT(gpu.vbios_version, HasValue(std::string("92.00.45.00.05")));
  EXPECT_THAT(gpu.persistence_mode, HasValue(true));
  EXPECT_THAT(gpu.pci_bus_id, HasValue(std::string("0000:07:00.0")));
  EXPECT_THAT(gpu.pcie_generation_current, HasValue(4u));
  EXPECT_THAT(gpu.pcie_generation_max, HasValue(4u));
  EXPECT_THAT(gpu.pcie_width_current, HasValue(16u));
  EXPECT_THAT(gpu.pcie_width_max, HasValue(16u));
  EXPECT_THAT(gpu.pcie_replay_count, HasValue(uint64_t{0}));
  EXPECT_THAT(gpu.fan_speeds_percent, IsNotSupported());
  EXPECT_THAT(gpu.clock_event_reasons, HasValue(clock_event::kSwPowerCap));  // "Clocks Throttle Reasons"
  EXPECT_THAT(gpu.memory_total_bytes, HasValue(81920 * kMiB));
  EXPECT_THAT(gpu.memory_used_bytes, HasValue(74311 * kMiB));
  EXPECT_THAT(gpu.memory_free_bytes, HasValue(6950 * kMiB));
  EXPECT_THAT(gpu.utilization_gpu_percent, HasValue(100u));
  EXPECT_THAT(gpu.utilization_memory_percent, HasValue(63u));
  EXPECT_THAT(gpu.ecc_enabled, HasValue(true));
  EXPECT_THAT(gpu.ecc_volatile_corrected, HasValue(uint64_t{3}));
  EXPECT_THAT(gpu.ecc_volatile_uncorrected, HasValue(uint64_t{0}));
  EXPECT_THAT(gpu.ecc_aggregate_corrected, HasValue(uint64_t{11}));
  EXPECT_THAT(gpu.ecc_aggregate_uncorrected, HasValue(uint64_t{1}));
  EXPECT_THAT(gpu.retired_pages_sbe, IsNotSupported());
  EXPECT_THAT(gpu.retired_pages_dbe, IsNotSupported());
  EXPECT_THAT(gpu.retired_pages_pending, IsNotSupported());
  EXPECT_THAT(gpu.remapped_rows_correctable, HasValue(3u));
  EXPECT_THAT(gpu.remapped_rows_uncorrectable, HasValue(1u));
  EXPECT_THAT(gpu.remapped_rows_pending, HasValue(false));
  EXPECT_THAT(gpu.remapped_rows_failure, HasValue(false));
  EXPECT_THAT(gpu.temperature_c, HasValue(71u));
  EXPECT_THAT(gpu.temperature_shutdown_c, HasValue(92u));
  EXPECT_THAT(gpu.temperature_slowdown_c, HasValue(89u));
  EXPECT_THAT(gpu.temperature_max_operating_c, HasValue(85u));
  EXPECT_THAT(gpu.memory_temperature_c, HasValue(79u));
  EXPECT_THAT(gpu.power_draw_w, HasValue(398.12));
  EXPECT_THAT(gpu.power_limit_w, HasValue(400.0));
  EXPECT_THAT(gpu.power_default_limit_w, HasValue(400.0));
  EXPECT_THAT(gpu.sm_clock_mhz, HasValue(1275u));      // not "Max Clocks/SM"
  EXPECT_THAT(gpu.memory_clock_mhz, HasValue(1593u));  // nor "Applications Clocks/Memory"
  ASSERT_TRUE(gpu.processes.has_value());
  EXPECT_THAT(gpu.processes.value(), ElementsAre(IsProcess(3310457, "/usr/bin/python3", 74290),
                                                 IsProcess(3311020, "/usr/lib/xorg/Xorg", 4)));
}

TEST(NvidiaSmiQueryTextTest, GpuBlocksAreIndexedInOrder) {
  Snapshot snapshot = Parse(
      "GPU 00000000:18:00.0\n"
      "    Processes                             : None\n"
      "    Temperature\n"
      "        GPU Current Temp                  : 30 C\n"
      "\n"
      "GPU 00000000:2A:00.0\n"
      "    Fan Speed                             : [Unknown Error]\n"
      "    Temperature\n"
      "        GPU Current Temp                  : ERR!\n"
      "    Processes\n"
      "        Process ID                        : 1152\n"
      "            Type                          : C+G\n"
      "            Name                          : C:\\Windows\\System32\\dwm.exe\n"
      "            Used GPU Memory               : Not available in WDDM driver model\n");
  ASSERT_THAT(snapshot.gpus, SizeIs(2));
  EXPECT_EQ(snapshot.gpus[0].index, 0u);
  EXPECT_THAT(snapshot.gpus[0].temperature_c, HasValue(30u));
  EXPECT_THAT(snapshot.gpus[0].processes, HasValue(IsEmpty()));
  EXPECT_EQ(snapshot.gpus[1].index, 1u);
  EXPECT_THAT(snapshot.gpus[1].pci_bus_id, HasValue(std::string("0000:2a:00.0")));
  EXPECT_THAT(snapshot.gpus[1].fan_speeds_percent, FailedWith("[Unknown Error]"));
  EXPECT_THAT(snapshot.gpus[1].temperature_c, FailedWith("ERR!"));
  ASSERT_TRUE(snapshot.gpus[1].processes.has_value());
  ASSERT_THAT(snapshot.gpus[1].processes.value(), SizeIs(1));
  const ProcessInfo& process = snapshot.gpus[1].processes.value()[0];
  EXPECT_EQ(process.pid, 1152u);
  EXPECT_EQ(process.name, "C:\\Windows\\System32\\dwm.exe");
  EXPECT_THAT(process.used_memory_bytes, IsNotSupported());
}

TEST(NvidiaSmiQueryTextTest, PerformanceExcerptWithoutHeaderIsGpuZero) {
  Snapshot snapshot = Parse(
      "[root@node7 ~]# nvidia-smi -q -d PERFORMANCE | grep -A12 Event\n"
      "    Clocks Event Reasons\n"
      "        Idle                              : Not Active\n"
      "        SW Power Cap                      : Active\n"
      "        HW Slowdown                       : Active\n"
      "            HW Thermal Slowdown           : Not Active\n"
      "            HW Power Brake Slowdown       : Active\n");
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  EXPECT_EQ(snapshot.gpus[0].index, 0u);
  EXPECT_THAT(snapshot.gpus[0].clock_event_reasons,
              HasValue(clock_event::kSwPowerCap | clock_event::kHwSlowdown | clock_event::kHwPowerBrakeSlowdown));
}

TEST(NvidiaSmiQueryTextTest, SameKeyInAnotherSectionIsNotConfused) {
  // "Max Clocks" and "Applications Clocks" repeat the keys of "Clocks";
  // "GPU Memory Power Readings" repeats "Power Draw".
  Snapshot snapshot = Parse(
      "GPU 00000000:18:00.0\n"
      "    GPU Power Readings\n"
      "        Power Draw                        : 100.89 W\n"
      "    GPU Memory Power Readings \n"
      "        Power Draw                        : 69.61 W\n"
      "    Max Clocks\n"
      "        SM                                : 1980 MHz\n"
      "    MIG Devices\n"
      "        FB Memory Usage\n"
      "            Total                         : 9728 MiB\n");
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  EXPECT_THAT(snapshot.gpus[0].power_draw_w, HasValue(100.89));
  EXPECT_THAT(snapshot.gpus[0].sm_clock_mhz, IsNotSupported());
  EXPECT_THAT(snapshot.gpus[0].memory_total_bytes, IsNotSupported());
}

TEST(NvidiaSmiTableTest, H100QuadWithProcessTable) {
  Snapshot snapshot = Fixture("table_h100_x4_processes.txt");
  EXPECT_EQ(Iso(snapshot.taken_at), "2024-06-11T09:45:03.000Z");
  EXPECT_THAT(snapshot.driver_version, HasValue(std::string("550.90.07")));
  EXPECT_THAT(snapshot.cuda_driver_version, HasValue(12040));
  EXPECT_THAT(snapshot.device_count, IsNotSupported());  // the table does not say how many there are
  ASSERT_THAT(snapshot.gpus, SizeIs(4));
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(snapshot.gpus[i].index, i);

  const GpuSnapshot& busy = snapshot.gpus[0];
  EXPECT_THAT(busy.name, HasValue(std::string("NVIDIA H100 80GB HBM3")));
  EXPECT_THAT(busy.pci_bus_id, HasValue(std::string("0000:18:00.0")));
  EXPECT_THAT(busy.persistence_mode, HasValue(true));
  EXPECT_THAT(busy.ecc_enabled, HasValue(true));
  EXPECT_THAT(busy.ecc_volatile_uncorrected, HasValue(uint64_t{0}));
  EXPECT_THAT(busy.fan_speeds_percent, IsNotSupported());
  EXPECT_THAT(busy.temperature_c, HasValue(41u));
  EXPECT_THAT(busy.power_draw_w, HasValue(612.0));
  EXPECT_THAT(busy.power_limit_w, HasValue(700.0));
  EXPECT_THAT(busy.memory_used_bytes, HasValue(61790 * kMiB));
  EXPECT_THAT(busy.memory_total_bytes, HasValue(81559 * kMiB));
  EXPECT_THAT(busy.memory_free_bytes, IsNotSupported());
  EXPECT_THAT(busy.utilization_gpu_percent, HasValue(97u));
  ASSERT_TRUE(busy.processes.has_value());
  EXPECT_THAT(busy.processes.value(), ElementsAre(IsProcess(48213, "/opt/conda/bin/python3.10", 61234)));

  const GpuSnapshot& hot = snapshot.gpus[1];
  EXPECT_THAT(hot.ecc_volatile_uncorrected, HasValue(uint64_t{1}));
  EXPECT_THAT(hot.temperature_c, HasValue(87u));
  ASSERT_TRUE(hot.processes.has_value());
  EXPECT_THAT(hot.processes.value(), ElementsAre(IsProcess(48214, "/opt/conda/bin/python3.10", 39970),
                                                 IsProcess(51002, "nvidia-cuda-mps-server", 30)));

  const GpuSnapshot& failing = snapshot.gpus[2];
  EXPECT_THAT(failing.ecc_volatile_uncorrected, FailedWith("ERR!"));
  EXPECT_THAT(failing.ecc_enabled, IsNotSupported());
  EXPECT_THAT(failing.fan_speeds_percent, FailedWith("ERR!"));
  EXPECT_THAT(failing.temperature_c, HasValue(45u));
  EXPECT_THAT(failing.power_draw_w, FailedWith("ERR!"));
  EXPECT_THAT(failing.power_limit_w, HasValue(700.0));
  EXPECT_THAT(failing.utilization_gpu_percent, FailedWith("ERR!"));
  EXPECT_THAT(failing.processes, HasValue(IsEmpty()));

  EXPECT_THAT(snapshot.gpus[3].processes, HasValue(IsEmpty()));
  EXPECT_THAT(snapshot.gpus[3].pci_bus_id, HasValue(std::string("0000:5d:00.0")));
}

TEST(NvidiaSmiTableTest, OldDriverTwoRowBlocksAndProcessesWithoutMigColumns) {
  Snapshot snapshot = Fixture("table_p100_418.txt");
  EXPECT_EQ(Iso(snapshot.taken_at), "2020-02-03T17:10:02.000Z");
  EXPECT_THAT(snapshot.driver_version, HasValue(std::string("418.87.01")));
  EXPECT_THAT(snapshot.cuda_driver_version, HasValue(10010));
  ASSERT_THAT(snapshot.gpus, SizeIs(2));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_THAT(gpu.name, HasValue(std::string("Tesla P100-PCIE...")));
  EXPECT_THAT(gpu.persistence_mode, HasValue(false));
  EXPECT_THAT(gpu.ecc_volatile_uncorrected, HasValue(uint64_t{2}));
  EXPECT_THAT(gpu.temperature_c, HasValue(41u));
  EXPECT_THAT(gpu.power_draw_w, HasValue(249.0));
  EXPECT_THAT(gpu.memory_used_bytes, HasValue(15107 * kMiB));
  EXPECT_THAT(gpu.utilization_gpu_percent, HasValue(99u));
  ASSERT_TRUE(gpu.processes.has_value());
  EXPECT_THAT(gpu.processes.value(), ElementsAre(IsProcess(2217, "./train_resnet", 15097)));
  EXPECT_THAT(snapshot.gpus[1].pci_bus_id, HasValue(std::string("0000:82:00.0")));
  EXPECT_THAT(snapshot.gpus[1].processes, HasValue(IsEmpty()));
}

TEST(NvidiaSmiTableTest, WindowsDriverModelColumnAndCrlfLineEnds) {
  Snapshot snapshot = Parse(
      "\xEF\xBB\xBF"
      "+-----------------------------------------------------------------------------+\r\n"
      "| NVIDIA-SMI 531.14       Driver Version: 531.14       CUDA Version: 12.1     |\r\n"
      "|===============================+======================+======================|\r\n"
      "|   0  NVIDIA GeForce ... WDDM  | 00000000:01:00.0  On |                  N/A |\r\n"
      "| 30%   45C    P8    22W / 320W |    512MiB / 10240MiB |      3%      Default |\r\n"
      "+-------------------------------+----------------------+----------------------+\r\n"
      "| Processes:                                                                  |\r\n"
      "|    0   N/A  N/A      7132    C+G   ...\\Program Files\\App\\app.exe    N/A      |\r\n"
      "+-----------------------------------------------------------------------------+\r\n");
  EXPECT_THAT(snapshot.driver_version, HasValue(std::string("531.14")));
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_THAT(gpu.name, HasValue(std::string("NVIDIA GeForce ...")));
  EXPECT_THAT(gpu.persistence_mode, IsNotSupported());
  EXPECT_THAT(gpu.ecc_enabled, IsNotSupported());
  EXPECT_THAT(gpu.ecc_volatile_uncorrected, IsNotSupported());
  EXPECT_THAT(gpu.fan_speeds_percent, HasValue(std::vector<uint32_t>{30}));
  EXPECT_THAT(gpu.utilization_gpu_percent, HasValue(3u));
  ASSERT_TRUE(gpu.processes.has_value());
  ASSERT_THAT(gpu.processes.value(), SizeIs(1));
  EXPECT_EQ(gpu.processes.value()[0].name, "...\\Program Files\\App\\app.exe");
  EXPECT_THAT(gpu.processes.value()[0].used_memory_bytes, IsNotSupported());
}

TEST(NvidiaSmiTableTest, MigDeviceRowsAreNotGpus) {
  Snapshot snapshot = Parse(
      "|   0  NVIDIA A100-SXM4-40GB          On  |   00000000:07:00.0 Off |                   On |\n"
      "| N/A   33C    P0              42W / 400W |     87MiB / 40960MiB |     N/A      Default |\n"
      "|                                         |                        |              Enabled |\n"
      "+-----------------------------------------+------------------------+----------------------+\n"
      "| MIG devices:                                                                          |\n"
      "| GPU  GI  CI  MIG |                     Memory-Usage |        Vol|      Shared           |\n"
      "|==================+==================================+===========+=======================|\n"
      "|  0    1   0   0  |              37MiB / 19968MiB     | 42      0 |  3   0    2    0    0 |\n"
      "+------------------+----------------------------------+-----------+-----------------------+\n");
  ASSERT_THAT(snapshot.gpus, SizeIs(1));
  EXPECT_THAT(snapshot.gpus[0].ecc_enabled, HasValue(true));
  EXPECT_THAT(snapshot.gpus[0].utilization_gpu_percent, IsNotSupported());
  EXPECT_THAT(snapshot.gpus[0].memory_used_bytes, HasValue(87 * kMiB));
}

TEST(NvidiaSmiCsvTest, A100WithUnitsEveryMappedColumn) {
  Snapshot snapshot = Fixture("csv_a100_units.txt");
  EXPECT_EQ(Iso(snapshot.taken_at), "2023-03-01T14:05:10.412Z");
  EXPECT_THAT(snapshot.driver_version, HasValue(std::string("525.85.12")));
  EXPECT_THAT(snapshot.device_count, HasValue(2u));
  ASSERT_THAT(snapshot.gpus, SizeIs(2));
  const GpuSnapshot& gpu = snapshot.gpus[0];
  EXPECT_EQ(gpu.index, 0u);
  EXPECT_THAT(gpu.name, HasValue(std::string("NVIDIA A100-SXM4-80GB")));
  EXPECT_THAT(gpu.uuid, HasValue(std::string("GPU-5d1c8a3e-27f4-9b6a-0c3d-e81f47a9b205")));
  EXPECT_THAT(gpu.serial, HasValue(std::string("1324021045983")));
  EXPECT_THAT(gpu.vbios_version, HasValue(std::string("92.00.45.00.05")));
  EXPECT_THAT(gpu.pci_bus_id, HasValue(std::string("0000:07:00.0")));
  EXPECT_THAT(gpu.persistence_mode, HasValue(true));
  EXPECT_THAT(gpu.pcie_generation_current, HasValue(4u));
  EXPECT_THAT(gpu.pcie_generation_max, HasValue(4u));
  EXPECT_THAT(gpu.pcie_width_current, HasValue(16u));
  EXPECT_THAT(gpu.pcie_width_max, HasValue(16u));
  EXPECT_THAT(gpu.fan_speeds_percent, IsNotSupported());
  EXPECT_THAT(gpu.temperature_c, HasValue(71u));
  EXPECT_THAT(gpu.memory_temperature_c, HasValue(79u));
  EXPECT_THAT(gpu.utilization_gpu_percent, HasValue(100u));
  EXPECT_THAT(gpu.utilization_memory_percent, HasValue(63u));
  EXPECT_THAT(gpu.memory_total_bytes, HasValue(81920 * kMiB));
  EXPECT_THAT(gpu.memory_used_bytes, HasValue(74311 * kMiB));
  EXPECT_THAT(gpu.memory_free_bytes, HasValue(6950 * kMiB));
  EXPECT_THAT(gpu.power_draw_w, HasValue(398.12));
  EXPECT_THAT(gpu.power_limit_w, HasValue(400.0));
  EXPECT_THAT(gpu.power_default_limit_w, HasValue(400.0));
  EXPECT_THAT(gpu.sm_clock_mhz, HasValue(1275u));
  EXPECT_THAT(gpu.memory_clock_mhz, HasValue(1593u));
  EXPECT_THAT(gpu.clock_event_reasons, HasValue(clock_event::kSwPowerCap));
  EXPECT_THAT(gpu.ecc_enabled, HasValue(true));
  EXPECT_THAT(gpu.ecc_volatile_corrected, HasValue(uint64_t{3}));
  EXPECT_THAT(gpu.ecc_volatile_uncorrected, HasValue(uint64_t{0}));
  EXPECT_THAT(gpu.ecc_aggregate_corrected, HasValue(uint64_t{11}));
  EXPECT_THAT(gpu.ecc_aggregate_uncorrected, HasValue(uint64_t{1}));
  EXPECT_THAT(gpu.retired_pages_sbe, IsNotSupported());
  EXPECT_THAT(gpu.retired_pages_dbe, IsNotSupported());
  EXPECT_THAT(gpu.retired_pages_pending, IsNotSupported());
  EXPECT_THAT(gpu.remapped_rows_correctable, HasValue(3u));
  EXPECT_THAT(gpu.remapped_rows_uncorrectable, HasValue(1u));
  EXPECT_THAT(gpu.remapped_rows_pending, HasValue(false));
  EXPECT_THAT(gpu.remapped_rows_failure, HasValue(false));
  EXPECT_THAT(gpu.processes, IsNotSupported());

  const GpuSnapshot& second = snapshot.gpus[1];
  EXPECT_EQ(second.index, 1u);
  EXPECT_THAT(second.pci_bus_id, HasValue(std::string("0000:0f:00.0")));
  EXPECT_THAT(second.pcie_generation_current, HasValue(3u));
  EXPECT_THAT(second.pcie_width_current, HasValue(8u));
  EXPECT_THAT(second.clock_event_reasons, HasValue(clock_event::kGpuIdle));
  EXPECT_THAT(second.power_draw_w, HasValue(61.31));
}

TEST(NvidiaSmiCsvTest, SingleColumnAndReasonColumns) {
  Snapshot temperatures = Parse("temperature.gpu\n45\n51\n");
  ASSERT_THAT(temperatures.gpus, SizeIs(2));
  EXPECT_THAT(temperatures.gpus[1].temperature_c, HasValue(51u));

  Snapshot reasons = Parse(
      "index, clocks_event_reasons.hw_slowdown, clocks_throttle_reasons.sw_power_cap, power.draw.average [W], "
      "power.draw.instant [W], gpu_bus_id\n"
      "3, Active, Not Active, [N/A], 12.50 W, 00000000:3B:00.0\n");
  ASSERT_THAT(reasons.gpus, SizeIs(1));
  EXPECT_EQ(reasons.gpus[0].index, 3u);
  EXPECT_THAT(reasons.gpus[0].clock_event_reasons, HasValue(clock_event::kHwSlowdown));
  EXPECT_THAT(reasons.gpus[0].power_draw_w, HasValue(12.5));
  EXPECT_THAT(reasons.gpus[0].pci_bus_id, HasValue(std::string("0000:3b:00.0")));
}

TEST(NvidiaSmiCsvTest, RowsAreCheckedAgainstTheColumns) {
  Snapshot snapshot = Parse(
      "$ nvidia-smi --query-gpu=index,temperature.gpu,fan.speed --format=csv,noheader,nounits\n"
      "0, 40, 30\n"
      "1, 41, 31, 99\n"  // one cell too many: not a row of this query
      "2, ERR!, [GPU is lost]\n"
      "3, 43\n");  // cut off at the end of the capture
  ASSERT_THAT(snapshot.gpus, SizeIs(3));
  EXPECT_EQ(snapshot.gpus[1].index, 2u);
  EXPECT_THAT(snapshot.gpus[1].temperature_c, FailedWith("ERR!"));
  EXPECT_THAT(snapshot.gpus[1].fan_speeds_percent, FailedWith("[GPU is lost]"));
  EXPECT_EQ(snapshot.gpus[2].index, 3u);
  EXPECT_THAT(snapshot.gpus[2].temperature_c, HasValue(43u));
  EXPECT_THAT(snapshot.gpus[2].fan_speeds_percent, IsNotSupported());
}

TEST(NvidiaSmiCsvTest, HeaderlessRowsWithoutTheCommandAreRefused) {
  std::string error = ParseError("0, GPU-004f693d-767b-b215-b4a9-a18af0ffd643, GeForce GTX TITAN X, 25\n");
  EXPECT_THAT(error, HasSubstr("CSV without column names"));
  EXPECT_THAT(error, HasSubstr("--query-gpu"));
}

// ---- nvidia-smi's messages ----------------------------------------------------------

TEST(NvidiaSmiMessageTest, DriverWideFailures) {
  struct Case {
    const char* text;
    AccessError expected;
  };
  const Case cases[] = {
      {"Failed to initialize NVML: Unknown Error", AccessError::kUnknown},
      {"Failed to initialize NVML: Insufficient Permissions", AccessError::kNoPermission},
      {"Failed to initialize NVML: GPU is lost", AccessError::kGpuLost},
      {"Failed to initialize NVML: Driver Not Loaded", AccessError::kDriverNotLoaded},
      {"Failed to initialize NVML: GPU access blocked by the operating system", AccessError::kOther},
      {"NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA "
       "Display Driver is properly installed and present in your system.",
       AccessError::kLibraryNotFound},
  };
  for (const Case& c : cases) {
    Snapshot snapshot = Parse(c.text);
    EXPECT_EQ(snapshot.driver_error, c.expected) << c.text;
    EXPECT_EQ(snapshot.driver_message, c.text);
  }
}

TEST(NvidiaSmiMessageTest, NoDevicesMeansACountOfZero) {
  Snapshot snapshot = Parse("$ nvidia-smi\nNo devices were found\n");
  EXPECT_THAT(snapshot.device_count, HasValue(0u));
  EXPECT_THAT(snapshot.gpus, IsEmpty());
  EXPECT_EQ(snapshot.driver_error, AccessError::kNone);
}

// Newer nvidia-smi names the GPU's index before its bus id ("for GPU1: 0000:34:00.0"); the GPU the table leaves
// out keeps that index, and one already taken falls back to the next free one.
TEST(NvidiaSmiMessageTest, TheIndexANewerMessageNamesIsKept) {
  const std::string table = ReadFixture("table_p100_418.txt");  // GPUs 0 and 1
  Snapshot snapshot = Parse("Unable to determine the device handle for GPU7: 0000:34:00.0: Unknown Error\n"
                            "Unable to determine the device handle for GPU1: 0000:35:00.0: Unknown Error\n" +
                            table);
  ASSERT_THAT(snapshot.gpus, SizeIs(4));
  EXPECT_EQ(snapshot.gpus[2].index, 7u);
  EXPECT_THAT(snapshot.gpus[2].pci_bus_id, HasValue(std::string("0000:34:00.0")));
  EXPECT_EQ(snapshot.gpus[2].access_error, AccessError::kUnknown);
  EXPECT_EQ(snapshot.gpus[3].index, 8u) << "GPU 1 is the table's";
}

TEST(NvidiaSmiMessageTest, LostGpuJoinsTheTableGpuWithItsBusId) {
  const std::string table = ReadFixture("table_p100_418.txt");
  Snapshot snapshot = Parse(
      "Unable to determine the device handle for GPU0000:82:00.0: GPU is lost.  Reboot the system to recover "
      "this GPU\n"
      "Unable to determine the device handle for gpu 0000:83:00.0: Unknown Error\n" +
      table);
  ASSERT_THAT(snapshot.gpus, SizeIs(3));
  EXPECT_EQ(snapshot.gpus[0].access_error, AccessError::kNone);
  EXPECT_EQ(snapshot.gpus[1].access_error, AccessError::kGpuLost);
  EXPECT_THAT(snapshot.gpus[1].access_message, HasSubstr("GPU is lost"));
  EXPECT_THAT(snapshot.gpus[1].temperature_c, HasValue(36u));
  const GpuSnapshot& unlisted = snapshot.gpus[2];
  EXPECT_EQ(unlisted.index, 2u);
  EXPECT_THAT(unlisted.pci_bus_id, HasValue(std::string("0000:83:00.0")));
  EXPECT_EQ(unlisted.access_error, AccessError::kUnknown);
}

// ---- Input that is not nvidia-smi's -------------------------------------------------

TEST(NvidiaSmiRejectTest, EmptyAndBlankInput) {
  EXPECT_EQ(ParseError(""), "not recognised as nvidia-smi output: the input is empty");
  EXPECT_EQ(ParseError(" \n\t\r\n"), "not recognised as nvidia-smi output: the input is empty");
}

TEST(NvidiaSmiRejectTest, OnlyCommentsAndPrompts) {
  EXPECT_THAT(ParseError("# a note\n$ nvidia-smi\n"), StartsWith("not recognised as nvidia-smi output: found no"));
}

TEST(NvidiaSmiRejectTest, NulBytes) {
  const std::string text("| NVIDIA-SMI 535.129.03 \0\0\0 Driver Version: 535", 48);
  EXPECT_THAT(ParseError(text), HasSubstr("NUL bytes"));
}

TEST(NvidiaSmiRejectTest, BinaryWithoutNulBytes) {
  std::string noise;
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1103515245 + 12345;
    noise.push_back(static_cast<char>(1 + (state >> 16) % 255));
  }
  EXPECT_THAT(ParseError(noise), StartsWith("not recognised as nvidia-smi output"));
}

TEST(NvidiaSmiRejectTest, MegabyteLineIsSkippedNotScanned) {
  const std::string line(1 << 20, 'x');
  EXPECT_THAT(ParseError(line), HasSubstr("skipped 1 line(s) longer than"));
  // A long line beside a real report does not spoil it.
  Snapshot snapshot = Parse(line + "\n" + ReadFixture("018.txt"));
  EXPECT_THAT(snapshot.gpus, SizeIs(1));
}

TEST(NvidiaSmiRejectTest, FilesThatAreNotNvidiaSmiOutput) {
  struct Case {
    const char* file;
    const char* error;
  };
  const Case cases[] = {
      {"invalid/kernel_log.txt", "not recognised as nvidia-smi output"},
      {"invalid/lookalike_report.txt", "not recognised as nvidia-smi output"},
      {"invalid/other_xml.xml", "XML without an <nvidia_smi_log> element"},
      {"invalid/headerless_csv.txt", "CSV without column names"},
  };
  for (const Case& c : cases) {
    Result<Snapshot> snapshot = ReadNvidiaSmiFile(FixturePath(c.file));
    ASSERT_FALSE(snapshot) << c.file;
    EXPECT_THAT(snapshot.error().message, StartsWith(FixturePath(c.file) + ": ")) << c.file;
    EXPECT_THAT(snapshot.error().message, HasSubstr(c.error)) << c.file;
  }
}

TEST(NvidiaSmiRejectTest, EveryPrefixOfEveryFixtureParsesOrFailsCleanly) {
  // Captures get cut anywhere; none of the cuts may crash or hang (ASan/UBSan
  // builds check the rest). A cut keeps the readings before it.
  for (const auto& entry : std::filesystem::directory_iterator(FixturePath(""))) {
    if (!entry.is_regular_file()) continue;
    const std::string text = ReadFixture(entry.path().filename().string());
    for (size_t length = 0; length <= text.size(); length += 1 + length / 64) {
      Result<Snapshot> snapshot = ParseNvidiaSmi(std::string_view(text).substr(0, length), "cut");
      if (!snapshot) {
        EXPECT_THAT(snapshot.error().message,
                    ::testing::AnyOf(StartsWith("not recognised as nvidia-smi output: "),
                                     StartsWith("nvidia-smi CSV without column names")))
            << entry.path() << " cut at " << length;
      }
    }
  }
}

// ---- Files ---------------------------------------------------------------------------

class ReadNvidiaSmiFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::path(::testing::TempDir()) /
                 ("smi_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::filesystem::path directory_;
};

TEST_F(ReadNvidiaSmiFileTest, MissingFile) {
  const std::string path = (directory_ / "absent.txt").string();
  Result<Snapshot> snapshot = ReadNvidiaSmiFile(path);
  ASSERT_FALSE(snapshot);
  EXPECT_EQ(snapshot.error().message, path + ": no such file");
}

TEST_F(ReadNvidiaSmiFileTest, DirectoryIsNotAFile) {
  Result<Snapshot> snapshot = ReadNvidiaSmiFile(directory_.string());
  ASSERT_FALSE(snapshot);
  EXPECT_EQ(snapshot.error().message, directory_.string() + ": is a directory");
}

TEST_F(ReadNvidiaSmiFileTest, OversizedFile) {
  const std::filesystem::path path = directory_ / "huge.txt";
  std::ofstream(path).put('x');
  std::filesystem::resize_file(path, kMaxNvidiaSmiFileBytes + 1);  // sparse: costs no disk
  Result<Snapshot> snapshot = ReadNvidiaSmiFile(path.string());
  ASSERT_FALSE(snapshot);
  EXPECT_THAT(snapshot.error().message, HasSubstr("over the 64 MiB limit"));
}

TEST_F(ReadNvidiaSmiFileTest, SourceNamesTheFile) {
  const std::filesystem::path path = directory_ / "node7.txt";
  std::ofstream(path) << "No devices were found\n";
  Result<Snapshot> snapshot = ReadNvidiaSmiFile(path.string());
  ASSERT_TRUE(snapshot) << snapshot.error().message;
  EXPECT_EQ(snapshot->source, "nvidia-smi:" + path.string());
}

}  // namespace
}  // namespace gpudoctor
