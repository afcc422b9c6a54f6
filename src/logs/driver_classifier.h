// DriverClassifier: what part of the NVIDIA driver a kernel-log line comes
// from, and whether it is an error, for the driver's lines that no catalog
// pattern names (data/events.toml [driver]). Pure and immutable: one pass over
// the line, then a lookup of its function in a sorted prefix table.
//
//   DriverClassifier classifier(catalog.driver());
//   auto verdict = classifier.Classify("NVRM: GPU0 knvlinkFoo_GH100: Getting peer0's mask failed!");
//   // verdict.verdict == kError, verdict.subsystem->name == "nvlink", verdict.line.function == "knvlinkFoo_GH100"
//
// RM messages are "NVRM: [GPUn ]<function>: text"; a release driver prints
// them only at its error level, so a function a subsystem lists makes the line
// an error. Other driver lines ("NVRM: text", "nvidia-uvm: text", "[nvidia-drm]
// text") are errors when their text has one of the error words.
#pragma once

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "logs/catalog.h"

namespace gpudoctor {

// The parts of a driver line; views into the line.
struct DriverLine {
  std::string_view module;        // "NVRM", or the module tag found: "nvidia-uvm"
  std::string_view gpu_instance;  // "GPU6" from "NVRM: GPU6 func: ...", else empty
  std::string_view pci;           // "0000:01:00.0" from "NVRM: GPU 0000:01:00.0: ...", else empty
  std::string_view function;      // the printing function, else empty
  std::string_view text;          // what follows the prefix
};

enum class DriverVerdict {
  kNotDriver,     // neither "NVRM:" at the start nor a module tag
  kContinuation,  // "NVRM:" and an indent: the rest of the record before it
  kBenign,        // an error-level message listed as no fault
  kNotError,      // a driver line that states no error (a notice, a banner)
  kError,         // an event of `subsystem`'s kind (the generic kind when null)
};

struct DriverClassification {
  DriverVerdict verdict = DriverVerdict::kNotDriver;
  DriverLine line;
  const DriverSubsystem* subsystem = nullptr;  // null: no subsystem known
  const DriverBenign* benign = nullptr;        // with kBenign
};

// Splits "NVRM: ..." and module-tagged lines; nullopt for any other line.
std::optional<DriverLine> SplitDriverLine(std::string_view message, const std::vector<std::string_view>& modules);

class DriverClassifier {
 public:
  // `tables` must outlive the classifier.
  explicit DriverClassifier(const DriverTables& tables);

  DriverClassification Classify(std::string_view message) const;

  // The subsystem whose longest listed prefix starts `function` (leading
  // underscores ignored); null when none does.
  const DriverSubsystem* SubsystemOfFunction(std::string_view function) const;
  // The subsystem whose longest listed folder starts `path` (a driver source path).
  const DriverSubsystem* SubsystemOfFolder(std::string_view path) const;
  // The benign entry that `function` and `text` fit, or null. An entry that
  // gives only a function covers that function's lines that do not show it
  // (`function_shown` false: dumps, untagged text), which the driver tables
  // can never attribute to it from the line: only the tests use those.
  const DriverBenign* FindBenign(std::string_view function, std::string_view text, bool function_shown = true) const;
  // Whether `text` has one of the error words, in any case.
  bool HasErrorWord(std::string_view text) const;

  const DriverTables& tables() const { return tables_; }

 private:
  const DriverTables& tables_;
  std::vector<std::pair<std::string_view, const DriverSubsystem*>> prefixes_;  // sorted by prefix
  std::vector<std::string_view> modules_;
  std::vector<const DriverSubsystem*> module_subsystems_;  // by modules_ index
};

}  // namespace gpudoctor
