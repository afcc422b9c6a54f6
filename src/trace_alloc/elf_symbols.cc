#include "trace_alloc/elf_symbols.h"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <fmt/format.h>

namespace gpudoctor {
namespace {

// A bounds-checked copy of a structure of the image: a file's bytes, or a
// fuzzer's, need not be aligned for it, so they are copied, never cast.
template <typename T>
std::optional<T> At(std::string_view bytes, uint64_t offset) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

bool Within(std::string_view bytes, uint64_t offset, uint64_t size) {
  return offset <= bytes.size() && size <= bytes.size() - offset;
}

std::string HexOf(std::string_view data) {
  std::string hex;
  for (unsigned char c : data) hex += fmt::format("{:02x}", c);
  return hex;
}

// The GNU build id in a note section or segment's bytes.
std::string BuildIdIn(std::string_view notes) {
  size_t offset = 0;
  while (offset + sizeof(Elf64_Nhdr) <= notes.size()) {
    Elf64_Nhdr header;
    std::memcpy(&header, notes.data() + offset, sizeof header);
    offset += sizeof header;
    const uint64_t name_size = (static_cast<uint64_t>(header.n_namesz) + 3) & ~uint64_t{3};
    const uint64_t desc_size = (static_cast<uint64_t>(header.n_descsz) + 3) & ~uint64_t{3};
    if (name_size > notes.size() - offset || desc_size > notes.size() - offset - name_size) return {};
    const std::string_view name = notes.substr(offset, header.n_namesz);
    if (header.n_type == NT_GNU_BUILD_ID && name.size() >= 3 && name.substr(0, 3) == "GNU")
      return HexOf(notes.substr(offset + name_size, header.n_descsz));
    offset += name_size + desc_size;
  }
  return {};
}

void ReadSymbols(std::string_view bytes, const Elf64_Shdr& table, const Elf64_Shdr& strings,
                 std::vector<ElfFunction>& out) {
  if (table.sh_entsize != sizeof(Elf64_Sym) || !Within(bytes, table.sh_offset, table.sh_size) ||
      !Within(bytes, strings.sh_offset, strings.sh_size))
    return;
  const std::string_view names = bytes.substr(strings.sh_offset, strings.sh_size);
  const uint64_t count = table.sh_size / sizeof(Elf64_Sym);
  for (uint64_t i = 0; i < count; ++i) {
    Elf64_Sym symbol;
    std::memcpy(&symbol, bytes.data() + table.sh_offset + i * sizeof(Elf64_Sym), sizeof symbol);
    const unsigned type = ELF64_ST_TYPE(symbol.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || symbol.st_shndx == SHN_UNDEF || symbol.st_value == 0) continue;
    if (symbol.st_name >= names.size()) continue;
    const size_t end = names.find('\0', symbol.st_name);
    if (end == std::string_view::npos) continue;
    out.push_back({symbol.st_value, symbol.st_size, std::string(names.substr(symbol.st_name, end - symbol.st_name))});
  }
}

}  // namespace

const ElfFunction* ElfImage::Find(uint64_t address) const {
  auto after = std::upper_bound(functions.begin(), functions.end(), address,
                                [](uint64_t a, const ElfFunction& f) { return a < f.start; });
  if (after == functions.begin()) return nullptr;
  const ElfFunction& candidate = *std::prev(after);
  // As a distance: start + size may wrap for a symbol near the top of the address space.
  if (candidate.size != 0) return address - candidate.start < candidate.size ? &candidate : nullptr;
  return after == functions.end() || address < after->start ? &candidate : nullptr;
}

Result<ElfImage> ParseElfImage(std::string_view bytes) {
  if (bytes.size() < EI_NIDENT || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0) return Error{"not an ELF file"};
  ElfImage image;
  image.is_64_bit = static_cast<unsigned char>(bytes[EI_CLASS]) == ELFCLASS64;
  if (static_cast<unsigned char>(bytes[EI_DATA]) != ELFDATA2LSB) return Error{"a big-endian ELF file"};
  if (!image.is_64_bit) {
    const auto header = At<Elf32_Ehdr>(bytes, 0);
    if (!header) return Error{"ELF header cut short"};
    image.machine = header->e_machine;
    image.type = header->e_type;
    if (header->e_phentsize == sizeof(Elf32_Phdr)) {
      for (uint32_t i = 0; i < header->e_phnum; ++i) {
        const auto segment = At<Elf32_Phdr>(bytes, header->e_phoff + uint64_t{i} * sizeof(Elf32_Phdr));
        if (segment && segment->p_type == PT_INTERP) image.has_interpreter = true;
      }
    }
    return image;
  }
  const auto header = At<Elf64_Ehdr>(bytes, 0);
  if (!header) return Error{"ELF header cut short"};
  image.machine = header->e_machine;
  image.type = header->e_type;
  if (header->e_phnum != 0 && header->e_phentsize == sizeof(Elf64_Phdr)) {
    for (uint32_t i = 0; i < header->e_phnum; ++i) {
      const auto segment = At<Elf64_Phdr>(bytes, header->e_phoff + uint64_t{i} * sizeof(Elf64_Phdr));
      if (!segment) break;
      if (segment->p_type == PT_INTERP) image.has_interpreter = true;
      if (segment->p_type == PT_NOTE && image.build_id.empty() && Within(bytes, segment->p_offset, segment->p_filesz))
        image.build_id = BuildIdIn(bytes.substr(segment->p_offset, segment->p_filesz));
    }
  }
  if (header->e_shoff == 0) return image;
  if (header->e_shentsize != sizeof(Elf64_Shdr)) return Error{"unexpected section header size"};
  const auto first = At<Elf64_Shdr>(bytes, header->e_shoff);
  if (!first) return Error{"section headers out of the file"};
  const uint64_t count = header->e_shnum != 0 ? header->e_shnum : first->sh_size;  // extended numbering
  if (count > (bytes.size() - header->e_shoff) / sizeof(Elf64_Shdr)) return Error{"section headers out of the file"};
  if (count == 0) return image;
  std::vector<Elf64_Shdr> sections(count);
  std::memcpy(sections.data(), bytes.data() + header->e_shoff, count * sizeof(Elf64_Shdr));

  for (const Elf64_Shdr& section : sections) {
    if (section.sh_type == SHT_SYMTAB) image.has_symtab = true;
    if (section.sh_type == SHT_NOTE && image.build_id.empty() && Within(bytes, section.sh_offset, section.sh_size))
      image.build_id = BuildIdIn(bytes.substr(section.sh_offset, section.sh_size));
  }
  const uint32_t wanted = image.has_symtab ? SHT_SYMTAB : SHT_DYNSYM;
  for (const Elf64_Shdr& section : sections) {
    if (section.sh_type != wanted || section.sh_link >= count) continue;
    ReadSymbols(bytes, section, sections[section.sh_link], image.functions);
  }
  std::sort(image.functions.begin(), image.functions.end(), [](const ElfFunction& a, const ElfFunction& b) {
    return a.start != b.start ? a.start < b.start : a.size > b.size;
  });
  // Aliases share an address: keep the first (the largest).
  image.functions.erase(std::unique(image.functions.begin(), image.functions.end(),
                                    [](const ElfFunction& a, const ElfFunction& b) { return a.start == b.start; }),
                        image.functions.end());
  return image;
}

Result<ElfImage> ReadElfFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Error{path + ": " + std::strerror(errno)};
  struct stat status;
  if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) || status.st_size == 0) {
    close(fd);
    return Error{path + ": not a regular file"};
  }
  const size_t size = static_cast<size_t>(status.st_size);
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) return Error{path + ": " + std::strerror(errno)};
  Result<ElfImage> image = ParseElfImage(std::string_view(static_cast<const char*>(mapped), size));
  munmap(mapped, size);
  if (!image) return Error{path + ": " + image.error().message};
  return image;
}

std::string Demangle(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (demangled == nullptr || status != 0) {
    std::free(demangled);
    return name;
  }
  std::string result(demangled);
  std::free(demangled);
  return result;
}

FrameName Symbolizer::Name(const std::string& module_path, uint64_t offset) {
  auto found = images_.find(module_path);
  if (found == images_.end()) {
    std::shared_ptr<const ElfImage> loaded;
    if (Result<ElfImage> image = ReadElfFile(module_path)) {
      if (!image->has_symtab && image->build_id.size() > 2) {
        const std::string debug_file = "/usr/lib/debug/.build-id/" + image->build_id.substr(0, 2) + "/" +
                                       image->build_id.substr(2) + ".debug";
        if (Result<ElfImage> debug = ReadElfFile(debug_file); debug && debug->has_symtab) image = std::move(debug);
      }
      loaded = std::make_shared<const ElfImage>(std::move(*image));
    }
    found = images_.emplace(module_path, std::move(loaded)).first;
  }
  FrameName name;
  if (!found->second) return name;
  // A return address points after the call: look up the call itself.
  if (const ElfFunction* function = found->second->Find(offset == 0 ? 0 : offset - 1)) {
    name.function = Demangle(function->name);
    name.function_offset = offset - function->start;
  }
  return name;
}

}  // namespace gpudoctor
