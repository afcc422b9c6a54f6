// A strict reader of the Prometheus text exposition format (0.0.4), for
// tests: it accepts only what Prometheus accepts, and reads samples back so
// tests can assert on values rather than on substrings. Its sample-line
// parser is also what PromTextStream (prometheus_text_stream.h) reads other
// servers' answers with.
//
//   Result<PromExposition> e = ParsePrometheusText(body);
//   std::optional<double> t = e->Value("gpudoctor_gpu_temperature_celsius", {{"gpu", "0"}});
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpudoctor {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string type;  // counter, gauge, untyped, ...
  std::string help;
};

struct PromExposition {
  std::map<std::string, PromFamily> families;  // by name
  std::vector<PromSample> samples;

  // Samples of `name` whose labels include every pair of `labels`.
  std::vector<const PromSample*> Find(std::string_view name,
                                      const std::map<std::string, std::string>& labels = {}) const;
  // The value of the only matching sample; nullopt when none or several match.
  std::optional<double> Value(std::string_view name,
                              const std::map<std::string, std::string>& labels = {}) const;
};

// Checks: every line is "# HELP", "# TYPE" or a sample; metric and label
// names are valid; label values are properly quoted and escaped; a family's
// HELP and TYPE come before its samples; a family's samples are contiguous;
// no series (name + label set) appears twice; values parse.
Result<PromExposition> ParsePrometheusText(std::string_view text);

// One sample line ("name{label=\"value\"} 1.5 [timestamp]"), without its newline.
Result<PromSample> ParsePrometheusSample(std::string_view line);

// The metric name a sample line starts with; empty when it starts with none.
std::string_view PrometheusSampleName(std::string_view line);

}  // namespace gpudoctor
