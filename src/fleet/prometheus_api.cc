#include "fleet/prometheus_api.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "net/http_client.h"

namespace gpudoctor {
namespace {

using nlohmann::json;

// A field's text, or "" where it is missing or not a string: answers come
// from any server that speaks the API, and none of them may throw here.
std::string StringField(const json& object, const char* name) {
  auto found = object.find(name);
  return found != object.end() && found->is_string() ? found->get<std::string>() : std::string();
}

WallTime FromUnixSeconds(double seconds) {
  // Outside ±10^11 s (about 3,000 years) a time is nonsense; clamping keeps
  // the conversion to integer ticks defined.
  seconds = std::clamp(std::isfinite(seconds) ? seconds : 0.0, -1e11, 1e11);
  return WallTime{std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds))};
}

double UnixSeconds(WallTime time) { return std::chrono::duration<double>(time.time_since_epoch()).count(); }

// A sample is [unix seconds, "value"]; the value is a string so NaN and ±Inf survive JSON.
Result<PromPoint> ReadPoint(const json& pair) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_string()) {
    return Error{"a sample is not [time, \"value\"]"};
  }
  const std::string& text = pair[1].get_ref<const std::string&>();
  double value = 0;
  if (text == "NaN") value = std::nan("");
  else if (text == "+Inf") value = INFINITY;
  else if (text == "-Inf") value = -INFINITY;
  else if (auto parsed = ParseDouble(text)) value = *parsed;
  else return Error{"a sample's value is not a number: " + text};
  return PromPoint{FromUnixSeconds(pair[0].get<double>()), value};
}

Result<PromSeries> ReadSeries(const json& item, bool range) {
  if (!item.is_object()) return Error{"a result is not an object"};
  PromSeries series;
  if (auto metric = item.find("metric"); metric != item.end() && metric->is_object()) {
    for (const auto& [name, value] : metric->items()) {
      if (value.is_string()) series.labels[name] = value.get<std::string>();
    }
  }
  if (range) {
    auto values = item.find("values");
    if (values == item.end() || !values->is_array()) return Error{"a range result has no values"};
    for (const json& pair : *values) {
      Result<PromPoint> point = ReadPoint(pair);
      if (!point) return point.error();
      series.points.push_back(*point);
    }
  } else {
    auto value = item.find("value");
    if (value == item.end()) return Error{"an instant result has no value"};
    Result<PromPoint> point = ReadPoint(*value);
    if (!point) return point.error();
    series.points.push_back(*point);
  }
  return series;
}

class HttpPrometheusApi final : public PrometheusApi {
 public:
  HttpPrometheusApi(std::string origin, std::string prefix, Duration timeout, std::string token)
      : origin_(std::move(origin)), prefix_(std::move(prefix)), timeout_(timeout), token_(std::move(token)) {}

  Result<std::vector<PromSeries>> Query(std::string_view promql, WallTime at) override {
    return Post("/api/v1/query", fmt::format("query={}&time={:.3f}", FormEncode(promql), UnixSeconds(at)));
  }

  Result<std::vector<PromSeries>> QueryRange(std::string_view promql, WallTime start, WallTime end,
                                             Duration step) override {
    const double step_seconds = std::max(1.0, std::chrono::duration<double>(step).count());
    return Post("/api/v1/query_range", fmt::format("query={}&start={:.3f}&end={:.3f}&step={:.0f}s",
                                                   FormEncode(promql), UnixSeconds(start), UnixSeconds(end),
                                                   step_seconds));
  }

 private:
  // POST keeps long queries out of URLs and proxies' logs; every API server named above accepts it.
  Result<std::vector<PromSeries>> Post(const std::string& endpoint, std::string form) {
    HttpRequestSpec request{.method = "POST",
                            .origin = origin_,
                            .path = prefix_ + endpoint,
                            .body = std::move(form),
                            .content_type = "application/x-www-form-urlencoded",
                            .timeout = timeout_};
    if (!token_.empty()) request.headers.emplace_back("Authorization", "Bearer " + token_);
    Result<HttpAnswer> answer = SendHttp(request);
    if (!answer) return Error{origin_ + ": " + answer.error().message};
    Result<std::vector<PromSeries>> series = ParsePrometheusAnswer(answer->body);
    if (!series) {
      return Error{fmt::format("{}{}: HTTP {}: {}", origin_, request.path, answer->status, series.error().message)};
    }
    return series;
  }

  static std::string FormEncode(std::string_view text) {
    std::string out;
    for (unsigned char c : text) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
      else out += fmt::format("%{:02X}", c);
    }
    return out;
  }

  std::string origin_;
  std::string prefix_;
  Duration timeout_;
  std::string token_;
};

}  // namespace

const std::string& PromSeries::Label(const std::string& name) const {
  static const std::string kEmpty;
  auto found = labels.find(name);
  return found == labels.end() ? kEmpty : found->second;
}

Result<std::vector<PromSeries>> ParsePrometheusAnswer(std::string_view body) {
  json answer = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object()) return Error{"the answer is not JSON from a Prometheus API"};
  if (StringField(answer, "status") != "success") {
    std::string type = StringField(answer, "errorType");
    std::string message = StringField(answer, "error");
    if (type.empty() && message.empty()) return Error{"the answer's status is not \"success\" and it names no error"};
    return Error{(type.empty() ? "error" : type) + ": " + (message.empty() ? "no message" : message)};
  }
  auto data = answer.find("data");
  if (data == answer.end() || !data->is_object()) return Error{"the answer has no data"};
  const std::string type = StringField(*data, "resultType");
  auto result = data->find("result");
  if (result == data->end()) return Error{"the answer has no result"};
  std::vector<PromSeries> out;
  if (type == "scalar") {
    Result<PromPoint> point = ReadPoint(*result);
    if (!point) return point.error();
    out.push_back(PromSeries{.points = {*point}});
    return out;
  }
  if (type != "vector" && type != "matrix") return Error{"unexpected result type '" + type + "'"};
  if (!result->is_array()) return Error{"the result is not a list"};
  for (const json& item : *result) {
    Result<PromSeries> series = ReadSeries(item, type == "matrix");
    if (!series) return series.error();
    out.push_back(std::move(*series));
  }
  return out;
}

Result<std::unique_ptr<PrometheusApi>> MakeHttpPrometheusApi(const std::string& url, Duration timeout,
                                                             std::string bearer_token) {
  auto split = SplitHttpUrl(url);
  if (!split) return split.error();
  return std::unique_ptr<PrometheusApi>(
      new HttpPrometheusApi(split->first, split->second, timeout, std::move(bearer_token)));
}

std::string PromDuration(Duration d) {
  return fmt::format("{}s", std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(d).count()));
}

}  // namespace gpudoctor
