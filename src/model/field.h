// Field<T>: one reading that is a value, "not supported", or an error.
//
// Missing data is explicit: a field the hardware cannot report is
// NotSupported and a field whose read failed carries the error message. Code
// that displays or judges a field must handle all three; nothing ever turns a
// missing reading into 0.
//
// A snapshot holds over a thousand fields, so a Field is kept small: the
// value in place and the error text, which almost no field has, behind a
// pointer. A Field<uint64_t> is 24 bytes and moves without touching the heap.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace gpudoctor {

enum class FieldState : uint8_t { kNotSupported, kValue, kError };

template <typename T>
class Field {
 public:
  using value_type = T;

  Field() = default;  // not supported
  Field(const Field& other)
      : value_(other.value_), state_(other.state_), error_(other.error_ ? new std::string(*other.error_) : nullptr) {}
  Field& operator=(const Field& other) {
    if (this != &other) {
      value_ = other.value_;
      state_ = other.state_;
      error_.reset(other.error_ ? new std::string(*other.error_) : nullptr);
    }
    return *this;
  }
  Field(Field&&) noexcept = default;
  Field& operator=(Field&&) noexcept = default;

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
  // temporary Field, and a value assigned over an old one reuses its storage.
  void SetValue(T value) {
    state_ = FieldState::kValue;
    value_ = std::move(value);
    if (error_) [[unlikely]] error_.reset();
  }
  void SetFailed(std::string message) {
    state_ = FieldState::kError;
    value_ = T();
    if (error_) {
      *error_ = std::move(message);
    } else {
      error_ = std::make_unique<std::string>(std::move(message));
    }
  }
  void SetNotSupported() {
    state_ = FieldState::kNotSupported;
    ResetValue();
    error_.reset();
  }
  // Marks the field as holding a value and returns that value, to be filled
  // in place: a string or list keeps the memory it had, so refilling a field
  // from one snapshot to the next allocates nothing.
  T& MutableValue() {
    state_ = FieldState::kValue;
    if (error_) [[unlikely]] error_.reset();
    return value_;
  }

  FieldState state() const { return state_; }
  bool has_value() const { return state_ == FieldState::kValue; }
  bool not_supported() const { return state_ == FieldState::kNotSupported; }
  bool failed() const { return state_ == FieldState::kError; }
  // The value; only meaningful when has_value().
  const T& value() const { return value_; }
  T& value() { return value_; }
  // The error message; empty unless failed().
  const std::string& error() const { return error_ ? *error_ : EmptyText(); }
  // The value, or `fallback` when there is none; for arithmetic only, never display.
  T value_or(T fallback) const { return has_value() ? value_ : fallback; }
  std::optional<T> optional() const { return has_value() ? std::optional<T>(value_) : std::nullopt; }

  bool operator==(const Field& other) const {
    if (state_ != other.state_) return false;
    switch (state_) {
      case FieldState::kValue: return value_ == other.value_;
      case FieldState::kError: return error() == other.error();
      case FieldState::kNotSupported: return true;
    }
    return false;
  }

 private:
  // Empty, keeping a string's or list's memory for the next value.
  void ResetValue() {
    if constexpr (requires(T& v) { v.clear(); }) {
      value_.clear();
    } else {
      value_ = T();
    }
  }
  static const std::string& EmptyText() {
    static const std::string empty;
    return empty;
  }

  T value_{};
  FieldState state_ = FieldState::kNotSupported;
  std::unique_ptr<std::string> error_;  // set only when failed()
};

}  // namespace gpudoctor
