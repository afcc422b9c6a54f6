// PrometheusApi: the two queries of Prometheus' HTTP API the fleet view needs,
// instant and range. Only the documented API (/api/v1/query and
// /api/v1/query_range) is used, so Thanos, Mimir and VictoriaMetrics answer too.
//
//   auto api = MakeHttpPrometheusApi("http://prometheus:9090");
//   Result<std::vector<PromSeries>> up = (*api)->Query("up{job=\"gpudoctor\"}", now);
//   for (const PromSeries& s : *up) s.labels.at("instance"), s.points.back().value;
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor {

struct PromPoint {
  WallTime time;
  double value = 0;
};

struct PromSeries {
  std::map<std::string, std::string> labels;
  std::vector<PromPoint> points;  // one for an instant query; in time order for a range

  // The label's value, or "" when the series has no such label.
  const std::string& Label(const std::string& name) const;
};

class PrometheusApi {
 public:
  virtual ~PrometheusApi() = default;
  // An instant vector (or scalar, as one series without labels) at `at`.
  virtual Result<std::vector<PromSeries>> Query(std::string_view promql, WallTime at) = 0;
  // A range matrix from `start` to `end` every `step`.
  virtual Result<std::vector<PromSeries>> QueryRange(std::string_view promql, WallTime start, WallTime end,
                                                     Duration step) = 0;
};

// What one answer may cost, whatever the server sends: its body is read up to
// kMaxPrometheusAnswerBytes, and the series read from it keep at most
// kMaxPrometheusKeptBytes (labels, points and their overhead). A fleet of
// 10,000 hosts answers its largest query in about 50 MB.
inline constexpr size_t kMaxPrometheusAnswerBytes = 64 << 20;
inline constexpr size_t kMaxPrometheusKeptBytes = 128 << 20;

// Reads the answer body of /api/v1/query or /api/v1/query_range, without
// building a document: nesting beyond the API's and series past
// `max_kept_bytes` are refused with a message. A label value's newlines are
// kept as "\n" (common/text.h OneLine): names are shown on lines of their own. An error carries Prometheus'
// own errorType and error when it gives them.
Result<std::vector<PromSeries>> ParsePrometheusAnswer(std::string_view body,
                                                      size_t max_kept_bytes = kMaxPrometheusKeptBytes);

// Talks to `url` (http or https, with an optional path prefix such as
// "/prometheus" or Mimir's "/prometheus", and optional user-info for basic
// authentication), each request under `timeout` from connecting to the last
// byte. `bearer_token`, when set, is sent as "Authorization: Bearer ...".
// Messages show the URL with its credentials masked.
Result<std::unique_ptr<PrometheusApi>> MakeHttpPrometheusApi(const std::string& url, Duration timeout,
                                                             std::string bearer_token = {});

// A PromQL duration for `d`, in whole seconds ("3600s").
std::string PromDuration(Duration d);

}  // namespace gpudoctor
