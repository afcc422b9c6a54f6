// Test helpers for the smi module: readable Field output and matchers.
//
//   EXPECT_THAT(gpu.temperature_c, HasValue(56u));
//   EXPECT_THAT(gpu.fan_speeds_percent, FailedWith("ERR!"));
#pragma once

#include <gmock/gmock.h>

#include <ostream>
#include <string>

#include "model/field.h"

namespace gpudoctor {

template <typename T>
void PrintTo(const Field<T>& field, std::ostream* out) {
  if (field.has_value()) *out << "Value(" << ::testing::PrintToString(field.value()) << ")";
  else if (field.failed()) *out << "Failed(\"" << field.error() << "\")";
  else *out << "NotSupported";
}

// `expected` is a value or a matcher: HasValue(56u), HasValue(SizeIs(2)).
MATCHER_P(HasValue, expected, std::string(negation ? "has no value matching" : "has a value matching") +
                                  " the expectation") {
  return arg.has_value() && ::testing::ExplainMatchResult(expected, arg.value(), result_listener);
}

MATCHER(IsNotSupported, "is not supported") { return arg.not_supported(); }

MATCHER_P(FailedWith, message, std::string("failed with \"") + message + "\"") {
  return arg.failed() && arg.error() == message;
}

}  // namespace gpudoctor
