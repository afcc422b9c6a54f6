// Track: one value as a pure function of scenario time.
//
// A track starts at a base value; timeline effects, each starting at a
// scenario time, replace the trajectory from then on. A ramp or a rise starts
// from whatever the track reads at the moment the effect begins, so effects
// chain naturally:
//
//   Track temperature(40);
//   temperature.Ramp(/*at=*/60, /*to=*/90, /*over=*/600);  // 40 -> 90 during 1m..11m
//   temperature.Set(/*at=*/900, 45);                       // cooled down at 15m
//   temperature.At(360);  // 65
//
// Jitter adds deterministic noise on top, so that a healthy, busy GPU does
// not look suspiciously flat:
//
//   Track utilization(97);
//   utilization.set_jitter(3, /*seed=*/42);  // 94..100, a new value each second
//
// No state changes when reading, so every process that evaluates the same
// track at the same scenario time sees the same value.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace gpudoctor::fake_nvml {

inline constexpr double kForever = std::numeric_limits<double>::infinity();

// A fixed 64-bit mix (SplitMix64's finaliser): the source of every
// pseudo-random but reproducible value in a scenario.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class Track {
 public:
  explicit Track(double base = 0) : base_(base) {}

  // From `at` on, the value is `value`.
  void Set(double at, double value);
  // From `at`, move linearly to `to` over `over` seconds, then hold.
  void Ramp(double at, double to, double over);
  // From `at`, rise by `per_second` each second for `over` seconds, then hold.
  void Rise(double at, double per_second, double over = kForever);

  // The value at scenario time t (seconds). Effects starting at the same time
  // apply in the order they were added.
  double At(double t) const;

  double base() const { return base_; }
  void set_base(double base) { base_ = base; }
  // Noise within +-amplitude, moving smoothly between new values drawn each
  // scenario second; `seed` tells tracks apart. Amplitude 0 turns it off.
  void set_jitter(double amplitude, uint64_t seed) {
    jitter_ = amplitude;
    seed_ = seed;
  }
  bool has_effects() const { return !effects_.empty(); }

 private:
  enum class Kind { kSet, kRamp, kRise };
  struct Effect {
    double at;
    Kind kind;
    double amount;    // kSet: the value; kRamp: the target; kRise: per second
    double duration;  // kRamp, kRise
  };
  void Add(Effect effect);

  double Trajectory(double t) const;
  double Noise(double t) const;

  double base_;
  std::vector<Effect> effects_;  // sorted by `at`, stable
  double jitter_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace gpudoctor::fake_nvml
