#include "health/detectors/cooling.h"

#include <gtest/gtest.h>

#include <cmath>

#include "health/detectors/detector_test_support.h"

namespace gpudoctor {
namespace {

using namespace testing;

GpuTrack Thermal(const std::function<double(double)>& temperature, std::optional<double> fan = 100,
                 const std::function<double(double)>& util = [](double) { return 97.0; }, Duration length = 20min) {
  return TrackOf(length, 5s, [&](double s) {
    GpuReadings p = Busy(util(s), 350 + std::fmod(s, 15), temperature(s));
    p.fan_percent = fan;
    return p;
  });
}

TEST(CoolingFailure, ClimbingUnderSteadyLoadWithFansAtMax) {
  // Stable at 70 °C, then the cooling fails at 10 minutes: +1 °C/min.
  GpuTrack track = Thermal([](double s) { return s < 600 ? 70 : 70 + (s - 600) / 60; });
  auto finding = DetectCoolingFailure(track, {}, End(track));
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->id, "cooling_failure");
  EXPECT_EQ(finding->severity, Severity::kWarning);
  EXPECT_NE(finding->summary.find("fans already at 100%"), std::string::npos) << finding->summary;

  // Too early to tell after 3 minutes of rise.
  GpuTrack early = Thermal([](double s) { return s < 600 ? 70 : 70 + (s - 600) / 60; }, 100,
                           [](double) { return 97.0; }, 13min);
  EXPECT_FALSE(DetectCoolingFailure(early, {}, End(early)));
}

TEST(CoolingFailure, LiquidCooledGpuWithoutFans) {
  GpuTrack track = Thermal([](double s) { return 50 + s / 60; }, std::nullopt);
  auto finding = DetectCoolingFailure(track, {}, End(track));
  ASSERT_TRUE(finding);
  EXPECT_NE(finding->summary.find("no fans reported"), std::string::npos);
}

TEST(CoolingFailure, HotEnoughIsCritical) {
  GpuTrack track = Thermal([](double s) { return 70 + s / 60; });  // 90 °C at the end
  auto finding = DetectCoolingFailure(track, {}, End(track));
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->severity, Severity::kCritical);
}

TEST(CoolingFailure, QuietOnHealthyThermalBehaviour) {
  auto quiet = [](const char* name, const GpuTrack& track) {
    EXPECT_FALSE(DetectCoolingFailure(track, {}, End(track))) << name;
  };
  quiet("fans still have headroom", Thermal([](double s) { return 50 + s / 60; }, 60));
  quiet("stable", Thermal([](double s) { return 72 + std::sin(s / 10); }));
  // A job starts at 10 minutes: warm-up with a 2-minute time constant levels off.
  quiet("warm-up after a load change",
        Thermal([](double s) { return s < 600 ? 35 : 35 + 40 * (1 - std::exp(-(s - 600) / 120)); }, 100,
                [](double s) { return s < 600 ? 0.0 : 97.0; }));
  quiet("load rising with temperature", Thermal([](double s) { return 50 + s / 60; }, 100,
                                                [](double s) { return 30 + s / 20; }));
}

}  // namespace
}  // namespace gpudoctor
