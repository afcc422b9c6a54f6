// Names for the frames of a call site: the function symbols of the ELF files
// the traced program had loaded, read by gpudoctor after the fact (the program
// sends only module paths and offsets, so its hooks never symbolise).
//
//   Symbolizer symbolizer;
//   FrameName name = symbolizer.Name("/usr/bin/python3.11", 0x1a2b3c);
//   name.function  // "PyObject_Call", or empty when no symbol covers it
//
// ElfImage parses bytes, so it is fuzzed (fuzz/trace_alloc_fuzz.cc); files are
// mapped read-only and only the pages of the tables are touched.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace gpudoctor {

struct ElfFunction {
  uint64_t start = 0;
  uint64_t size = 0;  // 0: up to the next function
  std::string name;   // as stored (mangled)
};

// What one ELF image says about itself and its functions.
struct ElfImage {
  bool is_64_bit = false;
  uint16_t machine = 0;        // EM_X86_64, EM_AARCH64, ...
  uint16_t type = 0;           // ET_EXEC, ET_DYN, ...
  bool has_interpreter = false;  // PT_INTERP: started by the dynamic loader (not static)
  bool has_symtab = false;       // the full symbol table, not only the dynamic one
  std::string build_id;          // hex, empty when none
  std::vector<ElfFunction> functions;  // sorted by start

  // The function containing `address` (as the file's own addresses count).
  const ElfFunction* Find(uint64_t address) const;
};

// Parses an ELF image held in memory; 32-bit images give their header facts
// and no functions. Fails for anything that is not ELF or that lies about
// its own sizes.
Result<ElfImage> ParseElfImage(std::string_view bytes);

// Reads a file's header and tables (mapped, not copied).
Result<ElfImage> ReadElfFile(const std::string& path);

// "GrowList(std::vector<void*, ...>&)" for "_Z8GrowListRSt6vectorIPvSaIS0_EE"; the name itself when not mangled.
std::string Demangle(const std::string& name);

struct FrameName {
  std::string function;  // demangled; empty when unknown
  uint64_t function_offset = 0;
};

// Names frames, reading each module once; a module without .symtab is
// looked for in /usr/lib/debug/.build-id by its build id.
class Symbolizer {
 public:
  FrameName Name(const std::string& module_path, uint64_t offset);

 private:
  std::map<std::string, std::shared_ptr<const ElfImage>> images_;  // null: unreadable
};

}  // namespace gpudoctor
