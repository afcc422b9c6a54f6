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
  Field(const Field&) = default;
  Field& operator=(const Field&) = default;
  // Moves skip the error text when there is none: moving an empty string
  // still copies its buffer, and snapshots move thousands of fields.
  Field(Field&& other) noexcept : state_(other.state_), value_(std::move(other.value_)) {
    if (!other.error_.empty()) error_ = std::move(other.error_);
  }
  Field& operator=(Field&& other) noexcept {
    state_ = other.state_;
    value_ = std::move(other.value_);
    if (other.error_.empty()) {
      error_.clear();
    } else {
      error_ = std::move(other.error_);
    }
    return *this;
  }
  static Field Value(T value) {
    Field f;
    f.SetValue(std::move(value));
    return f;
  }
  static Field NotSupported() { return Field(); }
  static Field Failed(std::string message) {
    Field f;
    f.SetFailed(std::move(message));
    return f;
  }

  // In-place updates, for code that fills many fields in a loop: no
  // temporary Field, no string moved.
  void SetValue(T value) {
    state_ = FieldState::kValue;
    value_ = std::move(value);
    error_.clear();
  }
  void SetFailed(std::string message) {
    state_ = FieldState::kError;
    value_.reset();
    error_ = std::move(message);
  }
  void SetNotSupported() {
    state_ = FieldState::kNotSupported;
    value_.reset();
    error_.clear();
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
