#include "track.h"

#include <algorithm>
#include <cmath>

namespace gpudoctor::fake_nvml {

void Track::Set(double at, double value) { Add({at, Kind::kSet, value, 0}); }
void Track::Ramp(double at, double to, double over) { Add({at, Kind::kRamp, to, over}); }
void Track::Rise(double at, double per_second, double over) { Add({at, Kind::kRise, per_second, over}); }

void Track::Add(Effect effect) {
  auto position = std::upper_bound(effects_.begin(), effects_.end(), effect.at,
                                   [](double at, const Effect& e) { return at < e.at; });
  effects_.insert(position, effect);
}

double Track::At(double t) const { return jitter_ == 0 ? Trajectory(t) : Trajectory(t) + Noise(t); }

double Track::Noise(double t) const {
  double second = std::floor(t);
  auto point = [&](double at) {
    uint64_t bits = Mix64(seed_ ^ static_cast<uint64_t>(static_cast<int64_t>(at)));
    return static_cast<double>(bits >> 11) * 0x1.0p-52 - 1.0;  // [-1, 1)
  };
  double from = point(second);
  return jitter_ * (from + (point(second + 1) - from) * (t - second));
}

double Track::Trajectory(double t) const {
  // The effect in force, and the value the track had when it began.
  const Effect* current = nullptr;
  double start = base_;
  auto evaluate = [&](double when) {
    if (current == nullptr) return base_;
    double elapsed = when - current->at;
    switch (current->kind) {
      case Kind::kSet: return current->amount;
      case Kind::kRamp:
        if (current->duration <= 0 || elapsed >= current->duration) return current->amount;
        return start + (current->amount - start) * (elapsed / current->duration);
      case Kind::kRise: return start + current->amount * std::min(elapsed, current->duration);
    }
    return start;
  };
  for (const Effect& effect : effects_) {
    if (effect.at > t) break;
    start = evaluate(effect.at);
    current = &effect;
  }
  return evaluate(t);
}

}  // namespace gpudoctor::fake_nvml
