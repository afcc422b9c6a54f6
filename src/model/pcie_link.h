// What a PCIe link carries per direction before protocol overhead: the
// generation's rate per lane after line coding (8b/10b for gen 1-2,
// 128b/130b for gen 3-5, FLIT for gen 6) times the width. Gen5 x16: 63.0 GB/s.
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>

namespace gpudoctor {

// nullopt for a generation this table does not know, or no width.
inline std::optional<double> PcieLinkGbPerSecond(uint32_t generation, uint32_t width) {
  static constexpr double kPerLane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938, 7.563};
  if (generation == 0 || generation >= std::size(kPerLane) || width == 0) return std::nullopt;
  return kPerLane[generation] * width;
}

}  // namespace gpudoctor
