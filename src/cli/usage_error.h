// What a rejected command line got wrong, in words that name the nearest
// valid choices: an unknown command at any level (gpudoctor stauts, gpudoctor
// diag memtst, gpudoctor fleet ofenders) or an unknown option, global or the
// command's own. main() prints it instead of CLI11's message and exits 64.
//
//   try { app.parse(argc, argv); }
//   catch (const CLI::ParseError& e) { if (auto text = DescribeUsageError(app, e)) ... }
//
//   gpudoctor: unknown command 'stauts'. Did you mean 'status'?
//   gpudoctor status: unknown option '--simlate'. Did you mean '--simulate'?
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace gpudoctor {

// nullopt: CLI11's own message is the right one (a missing value, a value a
// check refused, an argument no command takes). Reads what `app` kept of the
// failed parse (its chosen commands and the arguments left over), so call it
// before anything parses again.
std::optional<std::string> DescribeUsageError(const CLI::App& app, const CLI::ParseError& error);

}  // namespace gpudoctor
