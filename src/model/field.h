// Field<T>: one reading that is a value, "not supported", or an error.
//
// Missing data is explicit: a field the hardware cannot report is
// NotSupported and a field whose read failed carries the error message. Code
// that displays or judges a field must handle all three; nothing ever turns a
// missing reading into 0.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace gpudoctor {

enum class FieldState { kNotSupported, kValue, kError };

template <typename T>
class Field {
 public:
  Field() = default;  // not supported
  static Field Value(T value) {
    Field f;
    f.state_ = FieldState::kValue;
    f.value_ = std::move(value);
    return f;
  }
  static Field NotSupported() { return Field(); }
  static Field Failed(std::string message) {
    Field f;
    f.state_ = FieldState::kError;
    f.error_ = std::move(message);
    return f;
  }

  FieldState state() const { return state_; }
  bool has_value() const { return state_ == FieldState::kValue; }
  bool not_supported() const { return state_ == FieldState::kNotSupported; }
  bool failed() const { return state_ == FieldState::kError; }
  const T& value() const { return *value_; }
  T& value() { return *value_; }
  const std::string& error() const { return error_; }
  // The value, or `fallback` when there is none; for arithmetic only, never display.
  T value_or(T fallback) const { return has_value() ? *value_ : fallback; }
  std::optional<T> optional() const { return has_value() ? value_ : std::nullopt; }

  bool operator==(const Field& other) const = default;

 private:
  FieldState state_ = FieldState::kNotSupported;
  std::optional<T> value_;
  std::string error_;
};

}  // namespace gpudoctor
