#include "health/toml_table_reader.h"

#include <re2/re2.h>

#include <limits>

#include "common/text.h"

namespace gpudoctor {

const toml::node* TomlTableReader::Get(const char* key) {
  known_.insert(key);
  return table_.get(key);
}

void TomlTableReader::Read(const char* key, Duration& field) {
  const toml::node* node = Get(key);
  if (!node) return;
  std::optional<Duration> parsed;
  if (auto text = node->value<std::string>()) parsed = ParseDuration(*text);
  else if (auto seconds = node->value<double>(); seconds && *seconds >= 0)
    parsed = DurationFromSeconds(*seconds);
  if (parsed) field = *parsed;
  else Fail(key, "expected a duration such as \"90s\", \"5m\" or a number of seconds");
}

void TomlTableReader::Read(const char* key, double& field) {
  if (const toml::node* node = Get(key)) {
    if (auto value = node->value<double>()) field = *value;
    else Fail(key, "expected a number");
  }
}

void TomlTableReader::Read(const char* key, int& field) {
  if (const toml::node* node = Get(key)) {
    if (auto value = node->value<int64_t>(); value && *value >= 0 && *value < 1'000'000) field = static_cast<int>(*value);
    else Fail(key, "expected a non-negative integer");
  }
}

void TomlTableReader::Read(const char* key, uint32_t& field) {
  if (const toml::node* node = Get(key)) {
    auto value = node->value<int64_t>();
    if (value && *value >= 0 && *value <= std::numeric_limits<uint32_t>::max()) field = static_cast<uint32_t>(*value);
    else Fail(key, "expected a non-negative integer");
  }
}

void TomlTableReader::Read(const char* key, bool& field) {
  if (const toml::node* node = Get(key)) {
    if (auto value = node->value<bool>()) field = *value;
    else Fail(key, "expected true or false");
  }
}

void TomlTableReader::Read(const char* key, std::string& field) {
  if (const toml::node* node = Get(key)) {
    if (auto value = node->value<std::string>()) field = *value;
    else Fail(key, "expected a string");
  }
}

void TomlTableReader::Read(const char* key, std::vector<std::string>& field) {
  const toml::node* node = Get(key);
  if (!node) return;
  const toml::array* array = node->as_array();
  std::vector<std::string> values;
  for (size_t i = 0; array && i < array->size(); ++i) {
    auto value = (*array)[i].value<std::string>();
    if (!value || !(*array)[i].is_string()) {
      array = nullptr;
      break;
    }
    values.push_back(*value);
  }
  if (array) field = std::move(values);
  else Fail(key, "expected an array of strings");
}

void TomlTableReader::ReadRegex(const char* key, std::string& field) {
  Read(key, field);
  if (field.empty()) return;
  RE2 regex(field, RE2::Quiet);
  if (!regex.ok()) Fail(key, "bad regex: " + regex.error());
}

std::optional<Error> TomlTableReader::Finish() {
  for (const auto& [key, node] : table_)
    if (!known_.contains(std::string(key.str()))) Fail(std::string(key.str()), "unknown key");
  return error_;
}

void TomlTableReader::Fail(const std::string& key, const std::string& message) {
  if (!error_) error_ = Error{where_ + "." + key + ": " + message};
}

}  // namespace gpudoctor
