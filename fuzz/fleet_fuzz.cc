// What the fleet side reads from other servers: Prometheus' API answers,
// agents' /metrics text, and `sinfo` output. Arbitrary bytes must never
// crash, and what is read must hold together.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fleet/prometheus_api.h"
#include "net/prometheus_text_parser.h"
#include "net/prometheus_text_stream.h"
#include "slurm/slurm_control.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (auto series = gpudoctor::ParsePrometheusAnswer(input)) {
    for (const gpudoctor::PromSeries& s : *series) {
      for (const auto& [name, value] : s.labels) {
        if (s.Label(name) != value) __builtin_trap();
      }
    }
  }
  if (auto exposition = gpudoctor::ParsePrometheusText(input)) {
    for (const gpudoctor::PromSample& sample : exposition->samples) {
      if (sample.name.empty()) __builtin_trap();
    }
  }
  // The streaming reader of agents' /metrics, fed in uneven pieces, with small limits.
  size_t kept = 0;
  gpudoctor::PromTextStream stream([](std::string_view name) { return name.size() % 2 == 0; },
                                   [&kept](gpudoctor::PromSample sample) {
                                     if (sample.name.empty() || sample.name.size() % 2 != 0) __builtin_trap();
                                     ++kept;
                                   },
                                   {.max_line_bytes = 512, .max_kept_bytes = 4096});
  for (size_t at = 0, piece = 1; at < input.size(); at += piece, piece = piece * 3 % 61 + 1) {
    if (!stream.Feed(input.substr(at, piece))) break;
  }
  (void)stream.Finish();
  if (kept > 4096) __builtin_trap();
  if (auto rows = gpudoctor::ParseSinfoNodes(input)) {
    for (const gpudoctor::SlurmNodeRow& row : *rows) (void)gpudoctor::DrainedByGpudoctor(row);
  }
  return 0;
}
