#include "logs/pattern_databases.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <hs/hs.h>

namespace gpudoctor {

namespace {

// `dmesg -H` prints "[Feb23 16:24]" when the minute changes; the parser needs
// these lines to date the "[  +0.000316]" lines after them.
constexpr const char* kMinuteStampRegex = R"(^\[[^\s\]]{1,12}\s*\d{1,2}\s+\d{1,2}:\d\d\])";

// Serialised form: magic, CPU features, fingerprint of the compiled
// expressions, then each database as a 64-bit length and Vectorscan's bytes.
constexpr char kDatabasesMagic[8] = {'G', 'D', 'P', 'A', 'T', 'D', 'B', '1'};

std::string EscapeLiteral(std::string_view literal) {
  std::string out;
  for (unsigned char c : literal) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      out.push_back(static_cast<char>(c));
    } else {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
      out += buffer;
    }
  }
  return out;
}

// The expressions of one database, in Vectorscan's parallel-array form.
struct HsInput {
  std::vector<std::string> expressions;
  std::vector<unsigned> flags;
  std::vector<unsigned> ids;

  void Add(std::string expression, unsigned flag, unsigned id) {
    expressions.push_back(std::move(expression));
    flags.push_back(flag);
    ids.push_back(id);
  }

  Result<hs_database_t*> Compile(std::string_view what, const hs_platform_info_t& platform) const {
    std::vector<const char*> pointers;
    for (const std::string& e : expressions) pointers.push_back(e.c_str());
    hs_database_t* database = nullptr;
    hs_compile_error_t* error = nullptr;
    if (hs_compile_multi(pointers.data(), flags.data(), ids.data(), static_cast<unsigned>(pointers.size()),
                         HS_MODE_BLOCK, &platform, &database, &error) != HS_SUCCESS) {
      std::string message = std::string("cannot compile the ") + std::string(what) + ": " +
                            (error && error->message ? error->message : "unknown error");
      hs_free_compile_error(error);
      return Error{message};
    }
    return database;
  }

  // FNV-1a over every expression, flag and id: equal inputs, equal databases.
  void AddToFingerprint(uint64_t& hash) const {
    auto mix = [&hash](const void* data, size_t size) {
      for (size_t i = 0; i < size; ++i) hash = (hash ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ull;
    };
    for (size_t i = 0; i < expressions.size(); ++i) {
      mix(expressions[i].c_str(), expressions[i].size() + 1);
      mix(&flags[i], sizeof flags[i]);
      mix(&ids[i], sizeof ids[i]);
    }
  }
};

struct CatalogInputs {
  HsInput line;
  HsInput block;
  HsInput stamped_block;

  uint64_t Fingerprint() const {
    uint64_t hash = 0xcbf29ce484222325ull;
    for (const HsInput* input : {&line, &block, &stamped_block}) input->AddToFingerprint(hash);
    return hash;
  }
};

CatalogInputs InputsOf(const LogCatalog& catalog) {
  CatalogInputs inputs;
  const auto& patterns = catalog.patterns();
  for (uint32_t index = 0; index < patterns.size(); ++index) {
    const PatternSpec& spec = patterns[index];
    for (const std::string& literal : spec.literals) {
      unsigned flags = spec.caseless ? HS_FLAG_CASELESS : 0u;
      inputs.line.Add(EscapeLiteral(literal), flags | HS_FLAG_SINGLEMATCH, index);
      // Continue patterns' lines too: the reader skips the lines of an open
      // event's window that hold no literal (LogParser::WantsNextLine).
      inputs.block.Add(EscapeLiteral(literal), flags, index);
    }
  }
  for (const IdentitySpec& identity : kIdentitySpecs) {
    unsigned id = static_cast<unsigned>(patterns.size()) + static_cast<unsigned>(identity.kind);
    inputs.line.Add(EscapeLiteral(identity.literal), HS_FLAG_SINGLEMATCH, id);
    inputs.block.Add(EscapeLiteral(identity.literal), 0, id);
  }
  // A driver module's line that no pattern names goes to the driver classifier:
  // "NVRM:" whatever follows it (the patterns' "NVRM: " misses a tag glued to
  // odd bytes, which the classifier still takes), and the module's tag as it
  // opens a line ("nvidia-uvm:", "nvidia-peermem func:12 ERROR") or in brackets
  // ("[nvidia-drm]"). The bare tag ("nvidia-uvm") costs the scan several per
  // cent more (docs/benchmarks.md). The classifier takes only lines this scan
  // finds (LineMatcher::ScanFinds), so reading every line gives the same events.
  inputs.block.Add(EscapeLiteral("NVRM:"), 0, PatternDatabases::kNotACandidate);
  for (const DriverSubsystem& subsystem : catalog.driver().subsystems) {
    for (const std::string& module : subsystem.modules) {
      inputs.block.Add(EscapeLiteral(module + ":"), 0, PatternDatabases::kNotACandidate);
      inputs.block.Add(EscapeLiteral(module + " "), 0, PatternDatabases::kNotACandidate);
      inputs.block.Add(EscapeLiteral("[" + module + "]"), 0, PatternDatabases::kNotACandidate);
    }
  }
  // Matching the minute-stamp expression at every line start costs a third
  // of the scan, so only dmesg -H input pays for it.
  inputs.stamped_block = inputs.block;
  inputs.stamped_block.Add(kMinuteStampRegex, HS_FLAG_MULTILINE, PatternDatabases::kNotACandidate);
  return inputs;
}

void AppendWord(std::string& out, uint64_t value) { out.append(reinterpret_cast<const char*>(&value), sizeof value); }

// Reads a 64-bit word from the front of `bytes`; false when too short.
bool TakeWord(std::string_view& bytes, uint64_t& value) {
  if (bytes.size() < sizeof value) return false;
  std::memcpy(&value, bytes.data(), sizeof value);
  bytes.remove_prefix(sizeof value);
  return true;
}

}  // namespace

uint64_t HostCpuFeatures() {
  hs_platform_info_t platform{};
  if (hs_populate_platform(&platform) != HS_SUCCESS) return 0;
  return platform.cpu_features;
}

std::vector<uint64_t> PrebuiltCpuFeatureSets() {
  constexpr uint64_t kAvx512 = HS_CPU_FEATURES_AVX2 | HS_CPU_FEATURES_AVX512;
  return {0, HS_CPU_FEATURES_AVX2, kAvx512, kAvx512 | HS_CPU_FEATURES_AVX512VBMI};
}

void PatternDatabases::Free::operator()(hs_database* database) const { hs_free_database(database); }

Result<PatternDatabases> PatternDatabases::Compile(const LogCatalog& catalog, uint64_t cpu_features) {
  const CatalogInputs inputs = InputsOf(catalog);
  hs_platform_info_t platform{};
  platform.tune = HS_TUNE_FAMILY_GENERIC;
  platform.cpu_features = cpu_features;
  PatternDatabases databases;
  databases.cpu_features_ = cpu_features;
  databases.fingerprint_ = inputs.Fingerprint();
  std::pair<const HsInput*, Database*> parts[] = {{&inputs.line, &databases.line_},
                                                      {&inputs.block, &databases.block_},
                                                      {&inputs.stamped_block, &databases.stamped_block_}};
  const char* names[] = {"line literals", "block literals", "block literals with minute stamps"};
  for (size_t i = 0; i < std::size(parts); ++i) {
    auto compiled = parts[i].first->Compile(names[i], platform);
    if (!compiled) return compiled.error();
    parts[i].second->reset(*compiled);
  }
  return databases;
}

Result<std::string> PatternDatabases::Serialize() const {
  std::string out(kDatabasesMagic, sizeof kDatabasesMagic);
  AppendWord(out, cpu_features_);
  AppendWord(out, fingerprint_);
  for (const Database* database : {&line_, &block_, &stamped_block_}) {
    char* bytes = nullptr;
    size_t length = 0;
    if (hs_serialize_database(database->get(), &bytes, &length) != HS_SUCCESS) {
      return Error{"cannot serialise a pattern database"};
    }
    AppendWord(out, length);
    out.append(bytes, length);
    std::free(bytes);  // Vectorscan's default allocator is malloc
  }
  return out;
}

Result<PatternDatabases> PatternDatabases::Deserialize(std::string_view bytes, const LogCatalog& catalog,
                                                       uint64_t cpu_features) {
  if (bytes.size() < sizeof kDatabasesMagic ||
      std::memcmp(bytes.data(), kDatabasesMagic, sizeof kDatabasesMagic) != 0) {
    return Error{"not a serialised pattern database"};
  }
  bytes.remove_prefix(sizeof kDatabasesMagic);
  uint64_t built_for = 0, fingerprint = 0;
  if (!TakeWord(bytes, built_for) || !TakeWord(bytes, fingerprint)) return Error{"truncated pattern database"};
  if (built_for != cpu_features) return Error{"pattern database compiled for other CPU features"};
  if (fingerprint != InputsOf(catalog).Fingerprint()) return Error{"pattern database of another catalog"};
  PatternDatabases databases;
  databases.cpu_features_ = cpu_features;
  databases.fingerprint_ = fingerprint;
  for (Database* database : {&databases.line_, &databases.block_, &databases.stamped_block_}) {
    uint64_t length = 0;
    if (!TakeWord(bytes, length) || length > bytes.size()) return Error{"truncated pattern database"};
    hs_database_t* loaded = nullptr;
    hs_error_t status = hs_deserialize_database(bytes.data(), static_cast<size_t>(length), &loaded);
    database->reset(loaded);
    if (status != HS_SUCCESS) {
      return Error{status == HS_DB_VERSION_ERROR    ? "pattern database of another Vectorscan version"
                   : status == HS_DB_PLATFORM_ERROR ? "pattern database not for this CPU"
                                                    : "damaged pattern database"};
    }
    bytes.remove_prefix(static_cast<size_t>(length));
  }
  if (!bytes.empty()) return Error{"pattern database with trailing bytes"};
  return databases;
}

}  // namespace gpudoctor
