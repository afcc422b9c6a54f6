#include "fleet/prometheus_api.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "net/http_client.h"

namespace gpudoctor {
namespace {

using nlohmann::json;

WallTime FromUnixSeconds(double seconds) {
  // A time beyond what nanosecond ticks hold (about ±292 years from 1970) is nonsense: clamped to it.
  seconds = std::clamp(std::isfinite(seconds) ? seconds : 0.0, -8.9e9, 8.9e9);
  return WallTime{*DurationFromSeconds(seconds)};
}

double UnixSeconds(WallTime time) { return std::chrono::duration<double>(time.time_since_epoch()).count(); }

// A sample's value is a string so NaN and ±Inf survive JSON.
std::optional<double> SampleValue(const std::string& text) {
  if (text == "NaN") return std::nan("");
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  return ParseDouble(text);
}

// Reads an answer of the query API as nlohmann's parser walks it (SAX), into
// series directly: no document is built, nesting deeper than any answer has
// is refused at once, and what is kept is counted against a budget. Keys may
// come in any order; anything the API does not define is skipped.
class AnswerReader {
 public:
  explicit AnswerReader(size_t max_kept_bytes) : max_kept_bytes_(max_kept_bytes) {}

  using json = nlohmann::json;
  bool null() { return Scalar(Value::kOther); }
  bool boolean(bool) { return Scalar(Value::kOther); }
  bool number_integer(json::number_integer_t n) { return Number(static_cast<double>(n)); }
  bool number_unsigned(json::number_unsigned_t n) { return Number(static_cast<double>(n)); }
  bool number_float(json::number_float_t n, const std::string&) { return Number(n); }
  bool string(std::string& text) {
    text_ = std::move(text);
    return Scalar(Value::kString);
  }
  bool binary(json::binary_t&) { return Scalar(Value::kOther); }
  bool start_object(size_t) { return Open(/*array=*/false); }
  bool end_object() { return Close(); }
  bool start_array(size_t) { return Open(/*array=*/true); }
  bool end_array() { return Close(); }
  bool key(std::string& name) {
    key_ = std::move(name);
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) {
    if (error_.empty()) error_ = "the answer is not JSON from a Prometheus API";
    return false;
  }

  Result<std::vector<PromSeries>> Take() && {
    if (!error_.empty()) return Error{error_};
    if (!saw_root_object_) return Error{"the answer is not JSON from a Prometheus API"};
    if (status_ != "success") {
      if (error_type_.empty() && message_.empty())
        return Error{"the answer's status is not \"success\" and it names no error"};
      return Error{(error_type_.empty() ? "error" : error_type_) + ": " + (message_.empty() ? "no message" : message_)};
    }
    if (!saw_data_) return Error{"the answer has no data"};
    if (!saw_result_) return Error{"the answer has no result"};
    if (result_type_ == "scalar") {
      if (!scalar_ || result_is_list_of_series_) return Error{"a sample is not [time, \"value\"]"};
      return std::vector<PromSeries>{PromSeries{.points = {*scalar_}}};
    }
    if (result_type_ != "vector" && result_type_ != "matrix") return Error{"unexpected result type '" + result_type_ + "'"};
    if (!result_is_list_) return Error{"the result is not a list"};
    const bool range = result_type_ == "matrix";
    if (scalar_elements_ > 0) return Error{"a result is not an object"};
    for (const Shape& shape : shapes_) {
      if (range && !shape.has_values) return Error{"a range result has no values"};
      if (!range && !shape.has_value) return Error{"an instant result has no value"};
    }
    return std::move(series_);
  }

 private:
  enum class Role { kSkip, kRoot, kData, kResult, kSeries, kMetric, kPoint, kPoints };
  enum class Value { kString, kNumber, kOther };
  struct Frame {
    Role role;
    bool array;
  };
  struct Shape {
    bool has_value = false, has_values = false;
  };
  // A point being read: [time, "value"].
  struct PointReader {
    int elements = 0;
    double time = 0;
    std::optional<double> value;
    bool shape_ok = true;
  };
  static constexpr size_t kMaxDepth = 32;  // the API's answers nest 5 deep

  bool Fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }
  bool Spend(size_t bytes) {
    kept_bytes_ += bytes;
    if (kept_bytes_ > max_kept_bytes_)
      return Fail(fmt::format("the answer holds more than the {} MiB one answer may keep (narrow the query or shard "
                              "the fleet over several Prometheus servers)",
                              max_kept_bytes_ >> 20));
    return true;
  }

  // The role of a container or value that starts here.
  Role ChildRole(bool array) const {
    if (stack_.empty()) return array ? Role::kSkip : Role::kRoot;
    const Frame& parent = stack_.back();
    switch (parent.role) {
      case Role::kRoot:
        return key_ == "data" && !array ? Role::kData : Role::kSkip;
      case Role::kData:
        return key_ == "result" ? (array ? Role::kResult : Role::kSkip) : Role::kSkip;
      case Role::kResult:
        return array ? Role::kSkip : Role::kSeries;
      case Role::kSeries:
        if (key_ == "metric" && !array) return Role::kMetric;
        if (key_ == "value" && array) return Role::kPoint;
        if (key_ == "values" && array) return Role::kPoints;
        return Role::kSkip;
      case Role::kPoints:
        return array ? Role::kPoint : Role::kSkip;
      default:
        return Role::kSkip;
    }
  }

  bool Open(bool array) {
    if (stack_.size() >= kMaxDepth) return Fail(fmt::format("the answer nests deeper than {} levels", kMaxDepth));
    const Role role = ChildRole(array);
    if (!stack_.empty() && stack_.back().role == Role::kResult && array) {
      ++scalar_elements_;  // neither a series nor a scalar's time or value
      scalar_.reset();
    }
    if (!stack_.empty() && stack_.back().role == Role::kPoint) point_.shape_ok = false;  // a point holds no containers
    if (!stack_.empty() && stack_.back().role == Role::kData && key_ == "result") {
      saw_result_ = true;
      result_is_list_ = array;
    }
    switch (role) {
      case Role::kRoot:
        saw_root_object_ = true;
        break;
      case Role::kData:
        saw_data_ = true;
        break;
      case Role::kSeries:
        result_is_list_of_series_ = true;
        if (!Spend(sizeof(PromSeries) + 32)) return false;
        series_.emplace_back();
        shapes_.emplace_back();
        break;
      case Role::kPoint:
        point_ = {};
        break;
      default:
        break;
    }
    if (role == Role::kPoint && stack_.back().role == Role::kSeries) shapes_.back().has_value = true;
    if (role == Role::kPoints) shapes_.back().has_values = true;
    stack_.push_back({role, array});
    return true;
  }

  bool Close() {
    const Frame frame = stack_.back();
    stack_.pop_back();
    if (frame.role != Role::kPoint) return true;
    if (!point_.shape_ok || point_.elements != 2) return Fail("a sample is not [time, \"value\"]");
    if (!point_.value) return Fail("a sample's value is not a number: " + point_text_);
    if (!Spend(sizeof(PromPoint))) return false;
    series_.back().points.push_back({FromUnixSeconds(point_.time), *point_.value});
    return true;
  }

  bool Number(double n) {
    number_ = n;
    return Scalar(Value::kNumber);
  }

  bool Scalar(Value kind) {
    if (stack_.empty()) return true;  // a bare value: no root object, refused in Take
    const Frame& frame = stack_.back();
    switch (frame.role) {
      case Role::kRoot:
        if (kind == Value::kString) {
          if (key_ == "status") status_ = text_;
          else if (key_ == "errorType") error_type_ = text_;
          else if (key_ == "error") message_ = FitOneLine(text_, 1024);
        }
        return true;
      case Role::kData:
        if (key_ == "resultType" && kind == Value::kString) result_type_ = text_;
        if (key_ == "result") {
          saw_result_ = true;
          result_is_list_ = false;
        }
        return true;
      case Role::kResult:
        // A scalar's (or string's) result is itself one [time, "value"].
        ++scalar_elements_;
        if (scalar_elements_ == 1 && kind == Value::kNumber) scalar_time_ = number_;
        else if (scalar_elements_ == 2 && kind == Value::kString && scalar_time_) {
          if (std::optional<double> value = SampleValue(text_)) scalar_ = PromPoint{FromUnixSeconds(*scalar_time_), *value};
          else return Fail("a sample's value is not a number: " + FitOneLine(text_, 64));
        } else {
          scalar_.reset();
          scalar_time_.reset();
        }
        return true;
      case Role::kMetric:
        if (kind != Value::kString) return true;
        if (!Spend(key_.size() + text_.size() + 64)) return false;
        series_.back().labels[key_] = OneLine(text_);  // names shown on a line of their own
        return true;
      case Role::kPoint:
        ++point_.elements;
        if (point_.elements == 1 && kind == Value::kNumber) point_.time = number_;
        else if (point_.elements == 2 && kind == Value::kString) {
          point_.value = SampleValue(text_);
          point_text_ = FitOneLine(text_, 64);
        } else point_.shape_ok = false;
        return true;
      case Role::kPoints:
        return Fail("a sample is not [time, \"value\"]");
      default:
        return true;
    }
  }

  const size_t max_kept_bytes_;
  size_t kept_bytes_ = 0;
  std::vector<Frame> stack_;
  std::string key_;
  std::string text_;
  double number_ = 0;
  std::string error_;
  bool saw_root_object_ = false, saw_data_ = false, saw_result_ = false;
  bool result_is_list_ = false, result_is_list_of_series_ = false;
  std::string status_, error_type_, message_, result_type_;
  std::vector<PromSeries> series_;
  std::vector<Shape> shapes_;
  PointReader point_;
  std::string point_text_;
  size_t scalar_elements_ = 0;
  std::optional<double> scalar_time_;
  std::optional<PromPoint> scalar_;
};

template <typename Iterator>
Result<std::vector<PromSeries>> ParseAnswer(Iterator first, Iterator last, size_t max_kept_bytes) {
  AnswerReader reader(max_kept_bytes);
  (void)nlohmann::json::sax_parse(first, last, &reader, nlohmann::json::input_format_t::json, /*strict=*/true);
  return std::move(reader).Take();
}

class HttpPrometheusApi final : public PrometheusApi {
 public:
  HttpPrometheusApi(HttpUrl url, Duration timeout, std::string token)
      : url_(std::move(url)), timeout_(timeout), token_(std::move(token)) {}

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
                            .origin = url_.origin,
                            .path = url_.path + endpoint,
                            .body = std::move(form),
                            .content_type = "application/x-www-form-urlencoded",
                            .user = url_.user,
                            .password = url_.password,
                            .timeout = timeout_,
                            .max_body_bytes = kMaxPrometheusAnswerBytes};
    if (!token_.empty()) request.headers.emplace_back("Authorization", "Bearer " + token_);
    // Kept in pieces as it comes: a growing string would hold up to twice the
    // answer while it copies itself, and the answer may be 64 MiB.
    std::deque<char> body;
    request.on_body = [&body](std::string_view piece) {
      body.insert(body.end(), piece.begin(), piece.end());
      return true;
    };
    Result<HttpAnswer> answer = SendHttp(request);
    if (!answer) return Error{url_.shown + ": " + answer.error().message};
    Result<std::vector<PromSeries>> series = ParseAnswer(body.begin(), body.end(), kMaxPrometheusKeptBytes);
    if (!series) {
      return Error{fmt::format("{}{}: HTTP {}: {}", url_.shown, endpoint, answer->status, series.error().message)};
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

  HttpUrl url_;
  Duration timeout_;
  std::string token_;
};

}  // namespace

const std::string& PromSeries::Label(const std::string& name) const {
  static const std::string kEmpty;
  auto found = labels.find(name);
  return found == labels.end() ? kEmpty : found->second;
}

Result<std::vector<PromSeries>> ParsePrometheusAnswer(std::string_view body, size_t max_kept_bytes) {
  return ParseAnswer(body.begin(), body.end(), max_kept_bytes);
}

Result<std::unique_ptr<PrometheusApi>> MakeHttpPrometheusApi(const std::string& url, Duration timeout,
                                                             std::string bearer_token) {
  Result<HttpUrl> parsed = ParseHttpUrl(url);
  if (!parsed) return parsed.error();
  if (parsed->path.find('?') != std::string::npos)
    return Error{parsed->shown + ": give the API's base URL, without a query string"};
  return std::unique_ptr<PrometheusApi>(new HttpPrometheusApi(std::move(*parsed), timeout, std::move(bearer_token)));
}

std::string PromDuration(Duration d) {
  return fmt::format("{}s", std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(d).count()));
}

}  // namespace gpudoctor
