// Terminal presentation: colour only on a terminal, severity labels, findings.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "assess/assessment.h"
#include "health/finding.h"

namespace gpudoctor {

class Style {
 public:
  // mode: "auto" (colour when `stream` is a terminal and NO_COLOR is unset), "always", "never".
  Style(const std::string& mode, std::FILE* stream);
  std::string Severity(gpudoctor::Severity severity) const;  // "CRITICAL" in red, ...
  std::string Bold(const std::string& text) const;
  std::string Dim(const std::string& text) const;
  bool color() const { return color_; }

 private:
  std::string Wrap(const char* code, const std::string& text) const;
  bool color_ = false;
};

// Prints findings, worst first, each with evidence, cause and actions; a
// finding part of a root-cause finding is told in the root's evidence.
void PrintFindings(std::FILE* out, const Style& style, const std::vector<Finding>& findings, bool include_ok);

// "GPU 3 does not answer; last known as NVIDIA H100 80GB HBM3, serial 1320..., at
// 0000:61:00.0 (the agent's history)" for each GPU named by what it was last
// seen as: the card to pull; a GPU that nothing names is said to be of
// unknown identity. Nothing when every GPU says which card it is.
void PrintRememberedIdentities(std::FILE* out, const Style& style, const Assessment& assessment);

}  // namespace gpudoctor
