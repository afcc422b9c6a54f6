#include "host/host_parsers.h"

#include <gtest/gtest.h>

#include "common/test_data.h"

namespace gpudoctor {
namespace {

TEST(ParseLoadAverage, ReadsAllFields) {
  auto load = ParseLoadAverage("0.52 0.58 1.59 2/1134 12345\n");
  ASSERT_TRUE(load.ok());
  EXPECT_DOUBLE_EQ(load->one_minute, 0.52);
  EXPECT_DOUBLE_EQ(load->fifteen_minutes, 1.59);
  EXPECT_EQ(load->runnable_tasks, 2u);
  EXPECT_EQ(load->total_tasks, 1134u);
}

TEST(ParseLoadAverage, RejectsGarbage) {
  EXPECT_FALSE(ParseLoadAverage("").ok());
  EXPECT_FALSE(ParseLoadAverage("a b c d e").ok());
  EXPECT_FALSE(ParseLoadAverage("1 2 3 4").ok());
  EXPECT_FALSE(ParseLoadAverage("nan 1 1 1/2 3").ok());
}

TEST(ParsePressure, ReadsSomeAndFull) {
  auto pressure = ParsePressure(
      "some avg10=40.00 avg60=35.50 avg300=20.00 total=8000000\n"
      "full avg10=30.00 avg60=25.25 avg300=12.00 total=6000000\n");
  ASSERT_TRUE(pressure.ok());
  EXPECT_DOUBLE_EQ(pressure->some.avg60, 35.5);
  ASSERT_TRUE(pressure->full.has_value());
  EXPECT_DOUBLE_EQ(pressure->full->avg60, 25.25);
  EXPECT_EQ(pressure->full->total_us, 6000000u);
}

TEST(ParsePressure, FullLineIsOptional) {
  auto pressure = ParsePressure("some avg10=1.00 avg60=2.00 avg300=3.00 total=4\n");
  ASSERT_TRUE(pressure.ok());
  EXPECT_FALSE(pressure->full.has_value());
}

TEST(ParsePressure, RejectsMalformedLines) {
  EXPECT_FALSE(ParsePressure("").ok());
  EXPECT_FALSE(ParsePressure("some avg10=x avg60=2.00 avg300=3.00 total=4\n").ok());
  EXPECT_FALSE(ParsePressure("some avg10=1.00\n").ok());
}

TEST(ParseMemInfo, ConvertsKilobytes) {
  auto memory = ParseMemInfo("MemTotal: 1000 kB\nMemAvailable: 250 kB\nSwapTotal: 100 kB\nSwapFree: 40 kB\n");
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(memory->total_bytes, 1000u * 1024);
  EXPECT_EQ(memory->available_bytes, 250u * 1024);
  EXPECT_EQ(memory->swap_free_bytes, 40u * 1024);
}

TEST(ParseMemInfo, NeedsTotalAndAvailable) {
  EXPECT_FALSE(ParseMemInfo("MemTotal: 1000 kB\n").ok());
  EXPECT_FALSE(ParseMemInfo("garbage").ok());
}

TEST(ParseCpuList, CountsRanges) {
  EXPECT_EQ(*ParseCpuList("0-63\n"), 64u);
  EXPECT_EQ(*ParseCpuList("0-7,16-23"), 16u);
  EXPECT_EQ(*ParseCpuList("0"), 1u);
  EXPECT_FALSE(ParseCpuList("").ok());
  EXPECT_FALSE(ParseCpuList("7-3").ok());
}

TEST(ParseProcStat, TakesNameUpToLastParenthesis) {
  auto stat = ParseProcStat("2002 (my (odd) name) D 1 2002 2002 0");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->pid, 2002u);
  EXPECT_EQ(stat->name, "my (odd) name");
  EXPECT_EQ(stat->state, 'D');
  EXPECT_FALSE(ParseProcStat("2002 no name").ok());
  EXPECT_FALSE(ParseProcStat("(x)").ok());
  EXPECT_FALSE(ParseProcStat("12 (x)").ok());
}

TEST(ParseProcStat, ReadsTheParentAndTheStartTime) {
  // A real line: the name holds a space and parentheses, the start time is field 22.
  auto stat = ParseProcStat(
      "4123 (python3 (dl)) D 4100 4123 4100 0 -1 1077936192 90215 0 3 0 5210 900 0 0 20 0 12 0 987654 "
      "25769803776 402653 18446744073709551615 1 1 0 0 0 0 0 16781312 0 0 0 17 5 0 0 0 0 0");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->name, "python3 (dl)");
  EXPECT_EQ(stat->parent_pid, 4100u);
  EXPECT_EQ(stat->start_time_ticks, 987654u);
  EXPECT_EQ(ParseProcStat("2002 (short) D 1 2002")->start_time_ticks, 0u);
}

TEST(ParseContextSwitches, AddsVoluntaryAndInvoluntary) {
  EXPECT_EQ(*ParseContextSwitches("Name:\tbash\nState:\tD (disk sleep)\nvoluntary_ctxt_switches:\t150\n"
                                  "nonvoluntary_ctxt_switches:\t7\n"),
            157u);
  EXPECT_FALSE(ParseContextSwitches("Name:\tbash\nvoluntary_ctxt_switches:\t150\n").ok());
}

TEST(ParsePcieSpeed, AcceptsOldAndNewKernelForms) {
  EXPECT_DOUBLE_EQ(*ParsePcieSpeed("16.0 GT/s PCIe\n"), 16.0);
  EXPECT_DOUBLE_EQ(*ParsePcieSpeed("8 GT/s"), 8.0);
  EXPECT_DOUBLE_EQ(*ParsePcieSpeed("2.5 GT/s"), 2.5);
  EXPECT_FALSE(ParsePcieSpeed("Unknown").ok());
  EXPECT_FALSE(ParsePcieSpeed("Unknown speed").ok());
}

TEST(PcieGenerationForSpeed, MapsEveryGeneration) {
  EXPECT_EQ(PcieGenerationForSpeed(2.5), 1u);
  EXPECT_EQ(PcieGenerationForSpeed(8.0), 3u);
  EXPECT_EQ(PcieGenerationForSpeed(32.0), 5u);
  EXPECT_EQ(PcieGenerationForSpeed(64.0), 6u);
  EXPECT_EQ(PcieGenerationForSpeed(7.0), std::nullopt);
}

TEST(ParseNvidiaModuleVersion, ReadsSysfsAndProcForms) {
  EXPECT_EQ(*ParseNvidiaModuleVersion("550.54.15\n"), "550.54.15");
  EXPECT_EQ(*ParseNvidiaModuleVersion(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\n"
                "GCC version:  gcc version 12.2.0\n"),
            "535.129.03");
  EXPECT_EQ(
      *ParseNvidiaModuleVersion("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build  "
                                "(dvs-builder@U16)  Wed Feb 26 01:56:11 UTC 2025\n"),
      "570.124.06");
  EXPECT_FALSE(ParseNvidiaModuleVersion("GCC version: 12.2.0\n").ok());
  EXPECT_FALSE(ParseNvidiaModuleVersion("").ok());
}

TEST(ParseIpmiSdrList, ClassifiesCapturedSample) {
  std::vector<Sensor> sensors = ParseIpmiSdrList(ReadSourceFile("testdata/host/ipmitool_sdr_elist.txt"));
  ASSERT_EQ(sensors.size(), 17u);
  auto find = [&](std::string_view name) -> const Sensor& {
    for (const Sensor& s : sensors)
      if (s.name == name) return s;
    ADD_FAILURE() << "no sensor " << name;
    return sensors.front();
  };

  const Sensor& inlet = find("Inlet Temp");
  EXPECT_EQ(inlet.kind, SensorKind::kTemperature);
  EXPECT_EQ(inlet.value, 27.0);
  EXPECT_EQ(inlet.unit, "C");
  EXPECT_EQ(inlet.status, SensorStatus::kOk);

  const Sensor& dead_fan = find("Fan2A");
  EXPECT_EQ(dead_fan.kind, SensorKind::kFan);
  EXPECT_EQ(dead_fan.value, 0.0);
  EXPECT_EQ(dead_fan.status, SensorStatus::kCritical);

  const Sensor& absent_fan = find("Fan2B");
  EXPECT_EQ(absent_fan.status, SensorStatus::kNoReading);
  EXPECT_FALSE(absent_fan.value.has_value());

  EXPECT_EQ(find("Fan Redundancy").status, SensorStatus::kWarning);
  EXPECT_EQ(find("Voltage 2").status, SensorStatus::kCritical);
  EXPECT_EQ(find("Voltage 2").kind, SensorKind::kVoltage);
  EXPECT_EQ(find("Pwr Consumption").kind, SensorKind::kPower);
  EXPECT_EQ(find("Current 1").value, 1.4);

  const Sensor& psu1 = find("PS1 Status");
  EXPECT_EQ(psu1.kind, SensorKind::kPowerSupply);
  EXPECT_EQ(psu1.status, SensorStatus::kOk);
  const Sensor& psu2 = find("PS2 Status");
  EXPECT_EQ(psu2.kind, SensorKind::kPowerSupply);
  EXPECT_EQ(psu2.status, SensorStatus::kCritical);
  EXPECT_EQ(psu2.detail, "Presence detected, Power Supply AC lost");
  EXPECT_EQ(find("PS Redundancy").status, SensorStatus::kOk);
}

TEST(ParseIpmiSdrList, SurvivesGarbage) {
  EXPECT_TRUE(ParseIpmiSdrList("").empty());
  EXPECT_TRUE(ParseIpmiSdrList("|||||\n| | | | |\n").empty());
  std::string binary("a|b|c|d|\xff\x00\x01", 11);
  EXPECT_EQ(ParseIpmiSdrList(binary).size(), 1u);
}

}  // namespace
}  // namespace gpudoctor
