// `nvidia-smi topo -m`: how each GPU reaches the others, one row per GPU.
//
//           GPU0    GPU1    GPU2    NIC0    CPU Affinity    NUMA Affinity   GPU NUMA ID
//   GPU0     X      NV18    NV18    PIX     0-71            0               N/A
//   GPU1    NV18     X      NV12    SYS     0-71            0               N/A
//
// "NV<n>" is a bonded set of n NVLinks; X, PIX, PXB, PHB, NODE and SYS are paths over PCIe. Cells are separated
// by tabs or runs of spaces, and never contain spaces themselves; older drivers print no NUMA columns, and
// hosts name their NICs NIC<n> or mlx5_<n>.
//
// A GPU's NVLinks to its peers add up to the same number on every GPU of a machine built with NVLink (6 on a
// DGX-1's V100s, whatever the hybrid cube-mesh pairs them with; 18 on an H100 HGX). A GPU whose links add up
// to fewer than the others' has lost some (its peers lose their links to it too, so the GPUs with the fewest are
// the ones at fault): the matrix cannot say which links, so that GPU's nvlink_down is the capture's reported
// condition, with the pairs as evidence. A matrix without any NVLink judges nothing.

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/re2_view.h"
#include "common/text.h"
#include "smi/smi_formats.h"

namespace gpudoctor::smi {
namespace {

std::optional<uint32_t> GpuNumber(std::string_view cell) {
  if (!StartsWith(cell, "GPU")) return std::nullopt;
  return ParseInt<uint32_t>(cell.substr(3));
}

// The number of bonded NVLinks a cell names ("NV12" -> 12), or 0 for a PCIe path.
uint32_t NvLinksOf(std::string_view cell) {
  if (!StartsWith(cell, "NV")) return 0;
  return ParseInt<uint32_t>(cell.substr(2)).value_or(0);
}

struct TopologyRow {
  uint32_t gpu = 0;
  std::vector<std::string_view> peers;  // the cells of the GPU columns, X included
};

}  // namespace

bool LooksLikeTopology(std::string_view line) {
  static const RE2 kHeader(R"(\s*GPU0(?:\s+\S+)*\s+CPU Affinity.*)");
  return RE2::FullMatch(Piece(line), kHeader);
}

Result<size_t> ParseTopology(std::span<const std::string_view> lines, Snapshot& snapshot) {
  std::vector<std::optional<uint32_t>> columns;  // the GPU each matrix column names; nullopt: a NIC
  std::vector<TopologyRow> rows;
  for (std::string_view line : lines) {
    if (columns.empty()) {
      if (!LooksLikeTopology(line)) continue;
      for (std::string_view cell : SplitBlanks(line)) {
        if (cell == "CPU") break;
        columns.push_back(GpuNumber(cell));
      }
      continue;
    }
    std::vector<std::string_view> cells = SplitBlanks(line);
    if (cells.size() < columns.size() + 1) continue;
    std::optional<uint32_t> gpu = GpuNumber(cells.front());
    if (!gpu) continue;  // a NIC's row, the legend
    TopologyRow row{.gpu = *gpu};
    for (size_t column = 0; column < columns.size(); ++column)
      if (columns[column]) row.peers.push_back(cells[column + 1]);
    rows.push_back(std::move(row));
  }
  if (columns.empty()) return size_t{0};

  std::vector<uint32_t> peer_numbers;  // the GPU of each TopologyRow::peers cell
  for (const auto& column : columns)
    if (column) peer_numbers.push_back(*column);
  if (peer_numbers.size() > kMaxGpus || rows.size() > kMaxGpus) return TooManyGpus();
  snapshot.device_count = Field<uint32_t>::Value(static_cast<uint32_t>(peer_numbers.size()));
  std::vector<uint32_t> totals;
  for (const TopologyRow& row : rows) {
    if (snapshot.FindGpu(row.gpu) == nullptr) snapshot.gpus.emplace_back().index = row.gpu;
    uint32_t total = 0;
    for (std::string_view cell : row.peers) total += NvLinksOf(cell);
    totals.push_back(total);
  }
  // A GPU whose links are down also takes its peers' links to it down: only the GPUs that lost the most are
  // the ones at fault.
  const uint32_t most = totals.empty() ? 0 : *std::max_element(totals.begin(), totals.end());
  const uint32_t fewest = totals.empty() ? 0 : *std::min_element(totals.begin(), totals.end());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (most == 0 || totals[i] != fewest || fewest == most) continue;
    std::vector<std::string> pairs;
    for (size_t peer = 0; peer < rows[i].peers.size(); ++peer) {
      if (rows[i].peers[peer] == "X") continue;
      pairs.push_back(fmt::format("GPU{} {}", peer_numbers[peer], rows[i].peers[peer]));
    }
    snapshot.reported_conditions.push_back(ReportedCondition{
        .tool = "nvidia-smi topo -m",
        .rule_id = "nvlink_down",
        .gpu_index = rows[i].gpu,
        .failure = true,
        .system = "NVLink",
        .text = fmt::format("GPU{} reaches its peers over {} NVLinks in all, where another GPU has {}: {}", rows[i].gpu,
                            totals[i], most, fmt::join(pairs, ", "))});
  }
  return rows.size() + 1;
}

}  // namespace gpudoctor::smi
