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
// No state changes when reading, so every process that evaluates the same
// track at the same scenario time sees the same value.
#pragma once

#include <limits>
#include <vector>

namespace gpudoctor::fake_nvml {

inline constexpr double kForever = std::numeric_limits<double>::infinity();

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

  double base_;
  std::vector<Effect> effects_;  // sorted by `at`, stable
};

}  // namespace gpudoctor::fake_nvml
