// ToJsonText: the one way gpudoctor turns JSON into text, for every command's
// --json, every file it writes and every answer it serves. Strings inside come
// from outside (a kernel log line, a label an agent exports, a Slurm reason, a
// process name) and may hold bytes that are not UTF-8; JSON cannot carry them,
// and nlohmann::json throws on them by default, which would lose the whole
// answer for one byte. Here each invalid byte becomes U+FFFD instead.
//
//   std::printf("%s\n", ToJsonText(body, 2).c_str());   // pretty, 2 spaces
//   response.SetBody(ToJsonText(body), "application/json");  // compact
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace gpudoctor {

// `indent` < 0: compact, on one line; otherwise pretty with that many spaces.
std::string ToJsonText(const nlohmann::json& value, int indent = -1);
std::string ToJsonText(const nlohmann::ordered_json& value, int indent = -1);

// Appends the text ToJsonText writes for json(value): nlohmann's shortest
// form ("1039.756478", "5.0", "1e-05"), "null" for NaN and infinities. For
// writers that build a JSON line by hand, one number at a time.
void AppendJsonNumber(std::string& out, double value);

}  // namespace gpudoctor
