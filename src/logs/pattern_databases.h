// PatternDatabases: the Vectorscan databases of a catalog's literals, either
// compiled now or deserialised from bytes compiled when gpudoctor was built.
// Compiling them takes about 80 ms and 10 MB of scratch memory; deserialising
// takes well under a millisecond, so the built-in catalog's databases are
// compiled at build time (pattern_database_tool.cc) for each CPU feature set
// Vectorscan tunes for, and a command loads the one that fits its CPU.
//
//   auto compiled = PatternDatabases::Compile(catalog, HostCpuFeatures());
//   std::string bytes = compiled->Serialize();                 // at build time
//   auto loaded = PatternDatabases::Deserialize(bytes, catalog, HostCpuFeatures());
//   if (!loaded) ...compile at run time instead...
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "logs/catalog.h"

struct hs_database;

namespace gpudoctor {

// Lines that tie a PCI bus id to a GPU's UUID or serial number; they produce
// no event but let later events name the GPU.
enum class IdentityLine { kUuid, kBoardSerial, kSerial };

struct IdentitySpec {
  IdentityLine kind;
  const char* literal;  // in every identity line of this kind
  const char* regex;    // RE2: pci, uuid and serial fields
};

inline constexpr IdentitySpec kIdentitySpecs[] = {
    {IdentityLine::kUuid, "GPU at PCI:",
     R"(NVRM: GPU at PCI:(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?): (?P<uuid>GPU-[0-9A-Fa-f-]+))"},
    {IdentityLine::kBoardSerial, "GPU Board Serial Number:", R"(NVRM: GPU Board Serial Number: (?P<serial>\S+))"},
    {IdentityLine::kSerial, "serial number is",
     R"(NVRM: GPU (?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?): GPU serial number is (?P<serial>[\w-]+))"},
};

// Vectorscan's HS_CPU_FEATURES_* bits of this machine's CPU.
uint64_t HostCpuFeatures();

// The feature sets build-time databases are compiled for: each one Vectorscan
// has its own code for (none, AVX2, AVX-512, AVX-512 VBMI).
std::vector<uint64_t> PrebuiltCpuFeatureSets();

class PatternDatabases {
 public:
  // The id in block() of what names no pattern: a driver module's tag, the minute stamp.
  static constexpr unsigned kNotACandidate = 0xffffffffu;

  // Compiles the catalog's literals for a CPU with `cpu_features`.
  static Result<PatternDatabases> Compile(const LogCatalog& catalog, uint64_t cpu_features);
  // Loads bytes made by Serialize. Fails when they are damaged, come from
  // another Vectorscan version, another catalog, or were compiled for other
  // CPU features than `cpu_features`: the caller then compiles instead.
  static Result<PatternDatabases> Deserialize(std::string_view bytes, const LogCatalog& catalog,
                                              uint64_t cpu_features);
  Result<std::string> Serialize() const;

  // Literal id = pattern index; identity lines after the patterns.
  hs_database* line() const { return line_.get(); }
  // The literals that can start an event or name a GPU, under line()'s ids, and the
  // driver modules' tags under kNotACandidate: a line's ids here are its candidates.
  hs_database* block() const { return block_.get(); }
  // The same plus the `dmesg -H` minute stamp.
  hs_database* stamped_block() const { return stamped_block_.get(); }

 private:
  struct Free {
    void operator()(hs_database* database) const;
  };
  using Database = std::unique_ptr<hs_database, Free>;
  PatternDatabases() = default;

  uint64_t cpu_features_ = 0;
  uint64_t fingerprint_ = 0;  // of the expressions compiled
  Database line_;
  Database block_;
  Database stamped_block_;
};

}  // namespace gpudoctor
