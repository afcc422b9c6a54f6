// PromTextStream: reads the Prometheus text format as it arrives, piece by
// piece, from a server gpudoctor does not trust (an agent's /metrics, read by
// `gpudoctor fleet --agents`). It keeps only the line being read and the
// samples it was asked for, so its memory is bounded by its limits, not by
// what the server sends: at most max_line_bytes for the line, and at most
// max_kept_bytes for the samples handed to the sink.
//
//   PromTextStream stream([](std::string_view name) { return name.starts_with("gpudoctor_"); },
//                         [&](PromSample sample) { host.Add(sample); });
//   SendHttp({..., .on_body = [&](std::string_view piece) { return stream.Feed(piece); }});
//   if (Status done = stream.Finish(); !done) ... done.error().message ...;
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "net/prometheus_text_parser.h"

namespace gpudoctor {

struct PromTextLimits {
  size_t max_line_bytes = 64 << 10;
  size_t max_kept_bytes = 1 << 20;  // names, labels and values of the samples handed to the sink
};

class PromTextStream {
 public:
  // `wanted` sees each sample's metric name before the line is parsed; only
  // samples it accepts are parsed, checked and handed to `sink`. Comments and
  // blank lines are skipped; any other line that is not a sample is an error.
  PromTextStream(std::function<bool(std::string_view name)> wanted, std::function<void(PromSample)> sink,
                 PromTextLimits limits = {});

  // Reads the next piece; false once the text is refused (error() says why),
  // and every later piece is refused too.
  bool Feed(std::string_view piece);
  // The text ended: reads a last line without its newline. Ok unless refused.
  Status Finish();
  const std::string& error() const { return error_; }
  size_t lines() const { return lines_; }

 private:
  bool Line(std::string_view line);
  bool Refuse(std::string why);

  std::function<bool(std::string_view)> wanted_;
  std::function<void(PromSample)> sink_;
  PromTextLimits limits_;
  std::string partial_;  // the start of a line whose newline has not come yet
  size_t kept_bytes_ = 0;
  size_t lines_ = 0;
  std::string error_;
};

}  // namespace gpudoctor
