#include "track.h"

#include <algorithm>

namespace gpudoctor::fake_nvml {

void Track::Set(double at, double value) { Add({at, Kind::kSet, value, 0}); }
void Track::Ramp(double at, double to, double over) { Add({at, Kind::kRamp, to, over}); }
void Track::Rise(double at, double per_second, double over) { Add({at, Kind::kRise, per_second, over}); }

void Track::Add(Effect effect) {
  auto position = std::upper_bound(effects_.begin(), effects_.end(), effect.at,
                                   [](double at, const Effect& e) { return at < e.at; });
  effects_.insert(position, effect);
}

double Track::At(double t) const {
  // The effect in force, and the value the track had when it began.
  const Effect* current = nullptr;
  double start = base_;
  auto evaluate = [&](double when) {
    if (current == nullptr) return base_;
    double elapsed = when - current->at;
    switch (current->kind) {
      case Kind::kSet:
        return current->amount;
      case Kind::kRamp:
        if (current->duration <= 0 || elapsed >= current->duration) return current->amount;
        return start + (current->amount - start) * (elapsed / current->duration);
      case Kind::kRise:
        return start + current->amount * std::min(elapsed, current->duration);
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
