// Clock: the only source of time for code that reasons about durations.
//
// Production code uses SystemClock; tests inject FakeClock so detectors that
// look at minutes of history run in milliseconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace gpudoctor {

using WallTime = std::chrono::system_clock::time_point;
using Duration = std::chrono::nanoseconds;

// `seconds` as a Duration; nullopt when it is not finite or beyond what nanosecond ticks hold (about 292 years
// either way), where converting it would be undefined. Every count of seconds read from outside goes through it.
inline std::optional<Duration> DurationFromSeconds(double seconds) {
  if (!(seconds > -9e9 && seconds < 9e9)) return std::nullopt;  // NaN fails both
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time, used for timestamps shown to people and stored.
  virtual WallTime Now() const = 0;
  // Monotonic time, used for deadlines and rates.
  virtual std::chrono::steady_clock::time_point Steady() const = 0;
  // This clock's time at the moment the system clock read `system_time`, for
  // times stamped by the system clock elsewhere (a probe process's events).
  virtual WallTime FromSystemTime(WallTime system_time) const { return system_time; }
};

class SystemClock final : public Clock {
 public:
  WallTime Now() const override { return std::chrono::system_clock::now(); }
  std::chrono::steady_clock::time_point Steady() const override {
    return std::chrono::steady_clock::now();
  }
  static const SystemClock& Instance() {
    static const SystemClock clock;
    return clock;
  }
};

// A clock that moves only when told to. Wall and steady time advance together.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(WallTime start = WallTime{std::chrono::seconds{1'700'000'000}}) : now_(start) {}
  WallTime Now() const override { return now_; }
  std::chrono::steady_clock::time_point Steady() const override {
    return std::chrono::steady_clock::time_point{now_.time_since_epoch()};
  }
  void Advance(Duration d) { now_ += std::chrono::duration_cast<WallTime::duration>(d); }
  void Set(WallTime t) { now_ = t; }

 private:
  WallTime now_;
};

// A clock that runs `scale` times as fast as the system clock from `anchor`
// on: a simulated scenario's time (docs/scenarios.md, time_scale), so windows
// of minutes pass in seconds. Steady time stays real, as deadlines are.
class ScaledClock final : public Clock {
 public:
  ScaledClock(WallTime anchor, double scale) : anchor_(anchor), scale_(scale) {}
  WallTime Now() const override { return FromSystemTime(std::chrono::system_clock::now()); }
  std::chrono::steady_clock::time_point Steady() const override { return std::chrono::steady_clock::now(); }
  WallTime FromSystemTime(WallTime system_time) const override {
    const std::chrono::duration<double> real = system_time - anchor_;
    return anchor_ + std::chrono::duration_cast<WallTime::duration>(real * scale_);
  }
  double scale() const { return scale_; }

 private:
  WallTime anchor_;
  double scale_;
};

// Milliseconds since the Unix epoch, the unit used in JSON and the store.
inline int64_t ToUnixMillis(WallTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}
inline WallTime FromUnixMillis(int64_t ms) { return WallTime{std::chrono::milliseconds{ms}}; }

}  // namespace gpudoctor
