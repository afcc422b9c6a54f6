// Build-time tool: compiles a catalog's literal databases once for each CPU
// feature set Vectorscan tunes for and writes them as a C++ source file, so
// gpudoctor loads them at start instead of compiling them (pattern_databases.h).
//
//   pattern_database_tool data/events.toml builtin_pattern_databases.cc
//
// A feature set this Vectorscan cannot compile for is left out; gpudoctor
// compiles at run time on such a CPU.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <re2/re2.h>

#include "logs/catalog.h"
#include "logs/catalog_codec.h"
#include "logs/pattern_databases.h"

namespace {

using namespace gpudoctor;

// `bytes` as a C string literal, each byte a three-digit octal escape (never
// ambiguous with the next byte), 32 bytes a line.
std::string StringLiteral(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size() * 4 + bytes.size() / 8);
  char escape[8];
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i % 32 == 0) out += i == 0 ? "\"" : "\"\n    \"";
    std::snprintf(escape, sizeof escape, "\\%03o", static_cast<unsigned char>(bytes[i]));
    out += escape;
  }
  out += "\"";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: pattern_database_tool CATALOG.toml OUTPUT.cc\n");
    return 64;
  }
  auto catalog = LogCatalog::LoadFile(argv[1]);
  if (!catalog) {
    std::fprintf(stderr, "pattern_database_tool: %s\n", catalog.error().message.c_str());
    return 65;
  }
  // The built-in matcher compiles its regexes on first use, so a bad one
  // must fail the build, not a log line months later.
  for (const PatternSpec& spec : catalog->patterns()) {
    re2::RE2::Options options;
    options.set_log_errors(false);
    const re2::RE2 regex(spec.regex, options);
    if (!regex.ok()) {
      std::fprintf(stderr, "pattern_database_tool: pattern %s: bad regex: %s\n", spec.id.c_str(), regex.error().c_str());
      return 65;
    }
  }
  for (const IdentitySpec& identity : kIdentitySpecs) {
    if (!re2::RE2(identity.regex).ok()) {
      std::fprintf(stderr, "pattern_database_tool: identity line '%s': bad regex\n", identity.literal);
      return 65;
    }
  }
  std::string source = std::string("// Generated from ") + argv[1] +
                       " by pattern_database_tool; do not edit.\n"
                       "#include <string_view>\n#include <vector>\n\nnamespace gpudoctor {\nnamespace {\n";
  std::vector<std::string> names;
  for (uint64_t features : PrebuiltCpuFeatureSets()) {
    auto compiled = PatternDatabases::Compile(*catalog, features);
    auto bytes = compiled ? compiled->Serialize() : Result<std::string>(compiled.error());
    if (!bytes) {
      std::fprintf(stderr, "pattern_database_tool: CPU features %#llx left out: %s\n",
                   static_cast<unsigned long long>(features), bytes.error().message.c_str());
      continue;
    }
    names.push_back("kFeatures" + std::to_string(features));
    source += "constexpr char " + names.back() + "[] =\n    " + StringLiteral(*bytes) + ";\n";
  }
  source += "constexpr char kCatalog[] =\n    " + StringLiteral(CatalogCodec::Encode(*catalog)) + ";\n";
  source += "}  // namespace\n\nstd::string_view BuiltinCatalogBytes() { return {kCatalog, sizeof kCatalog - 1}; }\n";
  source += "\nstd::vector<std::string_view> BuiltinPatternDatabaseBytes() {\n  return {";
  for (const std::string& name : names) source += "std::string_view(" + name + ", sizeof " + name + " - 1), ";
  source += "};\n}\n\n}  // namespace gpudoctor\n";

  const std::string output = argv[2];
  std::ofstream out(output + ".tmp", std::ios::binary);
  out << source;
  out.close();
  if (!out || std::rename((output + ".tmp").c_str(), output.c_str()) != 0) {
    std::fprintf(stderr, "pattern_database_tool: cannot write %s\n", output.c_str());
    return 73;
  }
  return 0;
}
