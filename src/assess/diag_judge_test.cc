#include "assess/diag_judge.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

DiagOutcome BurnOutcome(int gpu, double fp32_tflops, const std::string& engine = "cuBLAS 12.8.4") {
  BurnResult burn;
  burn.precisions.push_back({.precision = "fp32", .engine = engine, .matrix = 8192, .iterations = 10, .tflops = fp32_tflops});
  return {.test = DiagTest::kBurn, .devices = {gpu}, .state = DiagState::kPassed, .burn = burn};
}

GpuSnapshot Gpu(uint32_t index, const std::string& bus) {
  GpuSnapshot gpu;
  gpu.index = index;
  gpu.pci_bus_id.SetValue(bus);
  return gpu;
}

bool Mentions(const DiagVerdict& verdict, const std::string& text) {
  for (const std::string& problem : verdict.problems)
    if (problem.find(text) != std::string::npos) return true;
  return false;
}

TEST(DiagJudge, AGpuMoreThanTenPercentBelowItsPeersIsFaulty) {
  std::vector<DiagOutcome> outcomes = {BurnOutcome(0, 50), BurnOutcome(1, 51), BurnOutcome(2, 49), BurnOutcome(3, 44),
                                       BurnOutcome(4, 46)};
  auto verdicts = VerdictsOf(outcomes);
  JudgeBurnPeers(outcomes, verdicts);
  // Medians of the others: GPU 3 sees 49.5 (44 is 11% below), GPU 4 sees 49.5 (46 is 7% below).
  EXPECT_EQ(verdicts[3].state, DiagState::kFaulty);
  EXPECT_TRUE(Mentions(verdicts[3], "11% slower than its peers"));
  for (int gpu : {0, 1, 2, 4}) EXPECT_EQ(verdicts[static_cast<size_t>(gpu)].state, DiagState::kPassed) << gpu;
}

TEST(DiagJudge, PeersAreComparedOnlyWithTheSameEngineAndNeverAlone) {
  std::vector<DiagOutcome> outcomes = {BurnOutcome(0, 50), BurnOutcome(1, 5, "gpudoctor kernel (CUDA cores)")};
  auto verdicts = VerdictsOf(outcomes);
  JudgeBurnPeers(outcomes, verdicts);
  EXPECT_EQ(verdicts[0].state, DiagState::kPassed);
  EXPECT_EQ(verdicts[1].state, DiagState::kPassed);
}

TEST(DiagJudge, NewUncorrectableErrorsRetiredPagesAndRemapsAreFaultsCorrectedOnesNotes) {
  Snapshot before, after;
  before.gpus = {Gpu(0, "0000:1b:00.0"), Gpu(1, "0000:43:00.0")};
  before.gpus[0].ecc_volatile_uncorrected.SetValue(0);
  before.gpus[0].remapped_rows_uncorrectable.SetValue(1);
  before.gpus[1].ecc_volatile_corrected.SetValue(5);
  after = before;
  after.gpus[0].ecc_volatile_uncorrected.SetValue(2);
  after.gpus[0].remapped_rows_uncorrectable.SetValue(2);
  after.gpus[1].ecc_volatile_corrected.SetValue(9);
  std::vector<DiagVerdict> verdicts = {{.gpu = 0, .state = DiagState::kPassed}, {.gpu = 1, .state = DiagState::kPassed}};
  JudgeCounters(before, after, verdicts);
  EXPECT_EQ(verdicts[0].state, DiagState::kFaulty);
  EXPECT_TRUE(Mentions(verdicts[0], "2 new uncorrectable ECC errors"));
  EXPECT_TRUE(Mentions(verdicts[0], "1 row remapped"));
  EXPECT_EQ(verdicts[1].state, DiagState::kPassed);
  ASSERT_EQ(verdicts[1].notes.size(), 1u);
  EXPECT_EQ(verdicts[1].notes[0], "4 corrected ECC errors during the test");
}

TEST(DiagJudge, AnXidCountsForTheGpuOnItsBusOnly) {
  Snapshot snapshot;
  snapshot.gpus = {Gpu(0, "00000000:1B:00.0"), Gpu(1, "00000000:43:00.0")};
  LogEvent xid;
  xid.kind = "xid";
  xid.xid = 79;
  xid.pci_bus_id = "0000:43:00.0";
  xid.message = "GPU has fallen off the bus.";
  LogEvent other;
  other.kind = "pcie_aer";
  other.pci_bus_id = "0000:1b:00.0";
  std::vector<DiagVerdict> verdicts = {{.gpu = 0, .state = DiagState::kPassed}, {.gpu = 1, .state = DiagState::kPassed}};
  JudgeXids({xid, other}, snapshot, verdicts);
  EXPECT_EQ(verdicts[0].state, DiagState::kPassed);
  EXPECT_EQ(verdicts[1].state, DiagState::kFaulty);
  EXPECT_TRUE(Mentions(verdicts[1], "Xid 79"));
}

TEST(DiagJudge, AHungGpuStaysHungWhateverElseIsFound) {
  DiagVerdict verdict{.gpu = 0, .state = DiagState::kHung};
  AddProblem(verdict, "Xid 79");
  EXPECT_EQ(verdict.state, DiagState::kHung);
  EXPECT_EQ(verdict.problems.size(), 1u);
}

TEST(DiagJudge, LinkRatesFollowGenerationAndWidth) {
  EXPECT_NEAR(*PcieLinkGbPerSecond(5, 16), 63.0, 0.01);
  EXPECT_NEAR(*PcieLinkGbPerSecond(4, 16), 31.5, 0.01);
  EXPECT_NEAR(*PcieLinkGbPerSecond(3, 8), 7.88, 0.01);
  EXPECT_FALSE(PcieLinkGbPerSecond(0, 16));
  EXPECT_FALSE(PcieLinkGbPerSecond(9, 16));
  EXPECT_FALSE(PcieLinkGbPerSecond(5, 0));
}

TEST(DiagJudge, ALinkIsJudgedOnItsSlowerDirection) {
  Snapshot snapshot;
  snapshot.gpus = {Gpu(0, "0000:1b:00.0"), Gpu(1, "0000:43:00.0"), Gpu(2, "0000:52:00.0")};
  for (GpuSnapshot& gpu : snapshot.gpus) {
    gpu.pcie_generation_max.SetValue(5);
    gpu.pcie_width_max.SetValue(16);
  }
  PcieResult pcie;
  pcie.links = {{.device = 0, .host_to_device_gb_per_s = 55.3, .device_to_host_gb_per_s = 55.1},
                {.device = 1, .host_to_device_gb_per_s = 50.0, .device_to_host_gb_per_s = 30.0},
                {.device = 2, .host_to_device_gb_per_s = 45.0, .device_to_host_gb_per_s = 46.0}};
  std::vector<DiagOutcome> outcomes = {
      {.test = DiagTest::kPcie, .devices = {0, 1, 2}, .state = DiagState::kPassed, .pcie = pcie}};
  auto verdicts = VerdictsOf(outcomes);
  JudgeLinks(outcomes, snapshot, verdicts);
  EXPECT_EQ(verdicts[0].state, DiagState::kPassed);
  EXPECT_TRUE(verdicts[0].notes.empty());
  EXPECT_EQ(verdicts[1].state, DiagState::kFaulty);
  EXPECT_TRUE(Mentions(verdicts[1], "30.0 GB/s, 48%"));
  EXPECT_EQ(verdicts[2].state, DiagState::kPassed);  // 71%: a note, not a fault
  ASSERT_EQ(verdicts[2].notes.size(), 1u);
  EXPECT_NE(verdicts[2].notes[0].find("71%"), std::string::npos);
}

TEST(DiagJudge, AResultFromAnotherDeviceIsNotThatGpus) {
  Snapshot snapshot;
  snapshot.gpus = {Gpu(0, "00000000:1B:00.0"), Gpu(1, "00000000:43:00.0")};
  MemtestResult right, wrong;
  right.pci_bus_id = "0000:1B:00.0";
  wrong.pci_bus_id = "0000:1B:00.0";  // CUDA's device 1 turned out to be GPU 0
  std::vector<DiagOutcome> outcomes = {
      {.test = DiagTest::kMemtest, .devices = {0}, .state = DiagState::kPassed, .memtest = right},
      {.test = DiagTest::kMemtest, .devices = {1}, .state = DiagState::kPassed, .memtest = wrong}};
  auto verdicts = VerdictsOf(outcomes);
  JudgeIdentity(outcomes, snapshot, verdicts);
  EXPECT_EQ(verdicts[0].state, DiagState::kPassed);
  EXPECT_EQ(verdicts[1].state, DiagState::kCouldNotRun);
  EXPECT_TRUE(Mentions(verdicts[1], "not NVML's GPU 1 at 0000:43:00.0"));
}

TEST(DiagJudge, AHardwareSlowdownIsAFaultOnlyInTheBurn) {
  std::map<int, GpuReadings> readings;
  readings[0] = {.max_temperature_c = 81, .clock_events = clock_event::kHwPowerBrakeSlowdown, .samples = 3};
  std::vector<DiagVerdict> verdicts = {{.gpu = 0, .test = DiagTest::kBurn, .state = DiagState::kPassed},
                                       {.gpu = 0, .test = DiagTest::kMemtest, .state = DiagState::kPassed}};
  JudgeReadings(readings, verdicts);
  EXPECT_EQ(verdicts[0].state, DiagState::kFaulty);
  EXPECT_TRUE(Mentions(verdicts[0], "hw_power_brake_slowdown"));
  EXPECT_EQ(verdicts[1].state, DiagState::kPassed);
}

}  // namespace
}  // namespace gpudoctor
