// TomlTableReader: reads the keys of one TOML table into fields, and reports
// the first key that is misspelt or of the wrong type, so a config mistake is
// never silently ignored. Used by the config parts that live in their own
// tables ([detectors], [correlations], [escalation]).
//
//   TomlTableReader reader(table, "detectors.cooling_failure");
//   reader.Read("window", config.window);   // "10m", or a number of seconds
//   reader.Read("min_rise_c", config.min_rise_c);
//   if (std::optional<Error> error = reader.Finish()) return *error;
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace gpudoctor {

class TomlTableReader {
 public:
  // `where` names the table in messages: "detectors.memory_leak".
  TomlTableReader(const toml::table& table, std::string where) : table_(table), where_(std::move(where)) {}

  // Each Read leaves `field` as it is when the key is absent.
  void Read(const char* key, Duration& field);  // "90s", "5m", or a number of seconds
  void Read(const char* key, double& field);
  void Read(const char* key, int& field);       // 0 to 999999
  void Read(const char* key, uint32_t& field);  // 0 to 2^32-1
  void Read(const char* key, bool& field);
  void Read(const char* key, std::string& field);
  void Read(const char* key, std::vector<std::string>& field);
  // A string that must compile as an RE2 regular expression (empty: none).
  void ReadRegex(const char* key, std::string& field);

  // A key another piece of code reads (a sub-table).
  void ReadElsewhere(const char* key) { known_.insert(key); }

  // The first problem found, including keys nobody asked for.
  std::optional<Error> Finish();
  void Fail(const std::string& key, const std::string& message);

 private:
  const toml::node* Get(const char* key);

  const toml::table& table_;
  std::string where_;
  std::set<std::string> known_;
  std::optional<Error> error_;
};

}  // namespace gpudoctor
