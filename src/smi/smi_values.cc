#include "smi/smi_values.h"

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <type_traits>
#include <utility>

#include "common/text.h"

namespace gpudoctor::smi {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ToLower(a) == ToLower(b);
}

bool IsOneOf(std::string_view text, std::initializer_list<std::string_view> words) {
  return std::any_of(words.begin(), words.end(), [&](std::string_view word) { return EqualsIgnoreCase(text, word); });
}

std::string Unexpected(std::string_view text) { return "unexpected value \"" + std::string(text) + "\""; }

// Splits "228.82 W" into "228.82" and "W".
std::pair<std::string_view, std::string_view> SplitNumberAndUnit(std::string_view text) {
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.' ||
                               (end == 0 && (text[end] == '-' || text[end] == '+')))) {
    ++end;
  }
  return {text.substr(0, end), Trim(text.substr(end))};
}

bool IsKnownUnit(std::string_view unit) {
  static constexpr std::array<std::string_view, 12> kUnits{"",   "%",    "C",  "W",  "MHz",     "MiB",
                                                           "x",  "KB/s", "us", "mV", "bank(s)", "RPM"};
  return std::find(kUnits.begin(), kUnits.end(), unit) != kUnits.end();
}

template <typename Number>
std::optional<Number> ParseNumber(std::string_view digits) {
  if constexpr (std::is_floating_point_v<Number>) {
    return ParseDouble(digits);
  } else {
    if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
    return ParseInt<Number>(digits);
  }
}

// Copies the state of a field that holds no reading into a field of another type.
template <typename To, typename From>
Field<To> WithoutReading(const Field<From>& from) {
  return from.failed() ? Field<To>::Failed(from.error()) : Field<To>::NotSupported();
}

}  // namespace

ValueKind ClassifyValue(std::string_view text) {
  text = Trim(text);
  if (text.empty() ||
      IsOneOf(text, {"N/A", "[N/A]", "Not Supported", "[Not Supported]", "NotSupported", "Not Available",
                     "[Not Available]", "Requested functionality has been deprecated"}) ||
      StartsWith(ToLower(text), "not available in ")) {  // "Not available in WDDM driver model"
    return ValueKind::kNotSupported;
  }
  // Any other bracketed text is a reason the read failed: "[Unknown Error]",
  // "[GPU is lost]", "[Insufficient Permissions]", "[GPU requires reset]".
  if (text == "ERR!" || (text.front() == '[' && text.back() == ']') ||
      IsOneOf(text, {"Unknown Error", "GPU is lost", "Insufficient Permissions", "GPU requires reset"})) {
    return ValueKind::kFailed;
  }
  return ValueKind::kReading;
}

Field<std::string> TextField(std::string_view text) {
  text = Trim(text);
  switch (ClassifyValue(text)) {
    case ValueKind::kNotSupported: return Field<std::string>::NotSupported();
    case ValueKind::kFailed: return Field<std::string>::Failed(std::string(text));
    case ValueKind::kReading: break;
  }
  return Field<std::string>::Value(std::string(text));
}

template <typename Number>
Field<Number> NumberField(std::string_view text) {
  Field<std::string> reading = TextField(text);
  if (!reading.has_value()) return WithoutReading<Number>(reading);
  auto [digits, unit] = SplitNumberAndUnit(reading.value());
  std::optional<Number> number = IsKnownUnit(unit) ? ParseNumber<Number>(digits) : std::nullopt;
  if (!number) return Field<Number>::Failed(Unexpected(reading.value()));
  return Field<Number>::Value(*number);
}

template Field<uint32_t> NumberField<uint32_t>(std::string_view);
template Field<uint64_t> NumberField<uint64_t>(std::string_view);
template Field<double> NumberField<double>(std::string_view);

Field<uint64_t> MebibytesField(std::string_view text) {
  Field<std::string> reading = TextField(text);
  if (!reading.has_value()) return WithoutReading<uint64_t>(reading);
  auto [digits, unit] = SplitNumberAndUnit(reading.value());
  int shift = 0;
  if (unit.empty() || unit == "MiB") shift = 20;
  else if (unit == "GiB") shift = 30;
  else if (unit == "KiB") shift = 10;
  std::optional<uint64_t> amount = shift ? ParseInt<uint64_t>(digits) : std::nullopt;
  if (!amount || *amount > (UINT64_MAX >> shift)) return Field<uint64_t>::Failed(Unexpected(reading.value()));
  return Field<uint64_t>::Value(*amount << shift);
}

Field<std::vector<uint32_t>> FanSpeedField(std::string_view text) {
  Field<uint32_t> percent = NumberField<uint32_t>(text);
  if (!percent.has_value()) return WithoutReading<std::vector<uint32_t>>(percent);
  return Field<std::vector<uint32_t>>::Value({percent.value()});
}

Field<bool> FlagField(std::string_view text) {
  Field<std::string> reading = TextField(text);
  if (!reading.has_value()) return WithoutReading<bool>(reading);
  const std::string& word = reading.value();
  if (IsOneOf(word, {"Yes", "Enabled", "On", "Active", "True"})) return Field<bool>::Value(true);
  if (IsOneOf(word, {"No", "Disabled", "Off", "Not Active", "False"})) return Field<bool>::Value(false);
  return Field<bool>::Failed(Unexpected(word));
}

Field<std::string> PciBusIdField(std::string_view text) {
  Field<std::string> reading = TextField(text);
  if (!reading.has_value()) return reading;
  std::optional<std::string> bus_id = NormalizePciBusId(reading.value());
  if (!bus_id) return Field<std::string>::Failed(Unexpected(reading.value()));
  return Field<std::string>::Value(std::move(*bus_id));
}

Field<uint64_t> HexMaskField(std::string_view text) {
  Field<std::string> reading = TextField(text);
  if (!reading.has_value()) return WithoutReading<uint64_t>(reading);
  std::string_view digits = reading.value();
  if (StartsWith(digits, "0x") || StartsWith(digits, "0X")) digits.remove_prefix(2);
  std::optional<uint64_t> mask = digits.empty() ? std::nullopt : ParseInt<uint64_t>(digits, 16);
  if (!mask) return Field<uint64_t>::Failed(Unexpected(reading.value()));
  return Field<uint64_t>::Value(*mask);
}

std::optional<int32_t> ParseCudaVersion(std::string_view text) {
  auto parts = Split(Trim(text), '.');
  if (parts.size() != 2) return std::nullopt;
  auto major = ParseInt<int32_t>(parts[0]);
  auto minor = ParseInt<int32_t>(parts[1]);
  if (!major || !minor || *major < 0 || *major > 1000 || *minor < 0 || *minor > 99) return std::nullopt;
  return *major * 1000 + *minor * 10;
}

std::optional<WallTime> ParseSmiTimestamp(std::string_view text) {
  static const RE2 kHeaderForm(R"((?:[A-Z][a-z]{2}\s+)?([A-Z][a-z]{2})\s+(\d{1,2})\s+(\d{1,2}):(\d{2}):(\d{2})\s+(\d{4}))");
  static const RE2 kCsvForm(R"((\d{4})/(\d{1,2})/(\d{1,2})\s+(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?)");
  static constexpr std::array<std::string_view, 12> kMonths{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  text = Trim(text);
  re2::StringPiece input(text.data(), text.size());
  std::string month_name;
  int year = 0, day = 0, hour = 0, minute = 0, second = 0;
  unsigned month = 0;
  std::string millis_text;
  if (RE2::FullMatch(input, kHeaderForm, &month_name, &day, &hour, &minute, &second, &year)) {
    auto found = std::find(kMonths.begin(), kMonths.end(), month_name);
    if (found == kMonths.end()) return std::nullopt;
    month = static_cast<unsigned>(found - kMonths.begin()) + 1;
  } else if (!RE2::FullMatch(input, kCsvForm, &year, &month, &day, &hour, &minute, &second, &millis_text)) {
    return std::nullopt;
  }
  using namespace std::chrono;
  year_month_day date{std::chrono::year{year}, std::chrono::month{month}, std::chrono::day{static_cast<unsigned>(day)}};
  // A wall time counts nanoseconds in 64 bits, about 292 years either side of 1970: a year past that (found by
  // fuzz_smi) would overflow, and no nvidia-smi wrote one. The bounds of the log's stamps (logs/log_time.h).
  if (!date.ok() || year < 1900 || year > 2200 || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  int millis = 0;
  if (!millis_text.empty()) {
    millis = ParseInt<int>(millis_text).value_or(0);
    for (size_t digits = millis_text.size(); digits < 3; ++digits) millis *= 10;
  }
  return WallTime{sys_days{date}.time_since_epoch() + hours{hour} + minutes{minute} + seconds{second} +
                  milliseconds{millis}};
}

}  // namespace gpudoctor::smi
