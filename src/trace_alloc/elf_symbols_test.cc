#include "trace_alloc/elf_symbols.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace gpudoctor {

__attribute__((noinline)) int FunctionToFindInTheTest(int x) { return x * 3 + 1; }

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(ElfSymbols, NamesAFunctionOfThisProgramFromItsOffset) {
  Dl_info info;
  struct link_map* map = nullptr;
  void* address = reinterpret_cast<void*>(&FunctionToFindInTheTest);
  ASSERT_NE(dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP), 0);
  const uint64_t offset = reinterpret_cast<uint64_t>(address) - map->l_addr;
  Symbolizer symbolizer;
  // A return address 5 bytes in: the lookup is of the byte before it.
  FrameName name = symbolizer.Name("/proc/self/exe", offset + 5);
  EXPECT_EQ(name.function, "gpudoctor::FunctionToFindInTheTest(int)");
  EXPECT_EQ(name.function_offset, 5u);
  EXPECT_TRUE(symbolizer.Name("/proc/self/exe", 0).function.empty());
  EXPECT_TRUE(symbolizer.Name("/no/such/file", 10).function.empty());
}

TEST(ElfSymbols, ReadsTheHeaderFacts) {
  Result<ElfImage> image = ParseElfImage(ReadAll("/proc/self/exe"));
  ASSERT_TRUE(image) << image.error().message;
  EXPECT_TRUE(image->is_64_bit);
  EXPECT_TRUE(image->has_interpreter);
  EXPECT_TRUE(image->has_symtab);
  EXPECT_FALSE(image->functions.empty());
  EXPECT_TRUE(std::is_sorted(image->functions.begin(), image->functions.end(),
                             [](const ElfFunction& a, const ElfFunction& b) { return a.start < b.start; }));
}

TEST(ElfSymbols, RefusesWhatIsNotElfOrLiesAboutItsSize) {
  EXPECT_FALSE(ParseElfImage(""));
  EXPECT_FALSE(ParseElfImage("#!/bin/sh\necho hi\n"));
  std::string image = ReadAll("/proc/self/exe");
  EXPECT_FALSE(ParseElfImage(std::string_view(image).substr(0, 40))) << "header cut short";
  // Section headers said to lie past the end.
  Elf64_Ehdr header;
  std::memcpy(&header, image.data(), sizeof header);
  header.e_shoff = image.size() - 10;
  std::string broken = image;
  std::memcpy(broken.data(), &header, sizeof header);
  EXPECT_FALSE(ParseElfImage(broken));
  // No section header at all under extended numbering (e_shnum 0, the first header's size 0): no functions.
  std::memcpy(&header, image.data(), sizeof header);
  header.e_phnum = 0;
  header.e_shnum = 0;
  header.e_shoff = sizeof header;
  std::string no_sections = image.substr(0, sizeof header) + std::string(sizeof(Elf64_Shdr), '\0');
  std::memcpy(no_sections.data(), &header, sizeof header);
  Result<ElfImage> empty = ParseElfImage(no_sections);
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_TRUE(empty->functions.empty());
  // Bytes at an odd address (a fuzzer's, a slice of a file): read the same, copied rather than cast.
  std::string shifted = " " + image;
  Result<ElfImage> odd = ParseElfImage(std::string_view(shifted).substr(1));
  ASSERT_TRUE(odd) << odd.error().message;
  EXPECT_EQ(odd->functions.size(), ParseElfImage(image)->functions.size());
  // A 32-bit program: the facts, no functions.
  Elf32_Ehdr small{};
  std::memcpy(small.e_ident, ELFMAG, SELFMAG);
  small.e_ident[EI_CLASS] = ELFCLASS32;
  small.e_ident[EI_DATA] = ELFDATA2LSB;
  small.e_machine = EM_386;
  Result<ElfImage> old = ParseElfImage(std::string_view(reinterpret_cast<const char*>(&small), sizeof small));
  ASSERT_TRUE(old);
  EXPECT_FALSE(old->is_64_bit);
  EXPECT_EQ(old->machine, EM_386);
}

TEST(ElfSymbols, FindsByRangeAndDemangles) {
  ElfImage image;
  image.functions = {{0x100, 0x10, "a"}, {0x200, 0, "b"}, {0x300, 0x8, "_ZN3foo3barEv"}};
  EXPECT_EQ(image.Find(0x100)->name, "a");
  EXPECT_EQ(image.Find(0x10f)->name, "a");
  EXPECT_EQ(image.Find(0x110), nullptr) << "past a sized function";
  EXPECT_EQ(image.Find(0x2ff)->name, "b") << "a function of no size runs to the next";
  EXPECT_EQ(image.Find(0x50), nullptr);
  EXPECT_EQ(Demangle(image.Find(0x304)->name), "foo::bar()");
  EXPECT_EQ(Demangle("main"), "main");
  EXPECT_EQ(Demangle("_Zgarbage"), "_Zgarbage");
}

// Found by fuzz_trace_alloc: a symbol near the top of the address space whose end wraps past zero.
TEST(ElfSymbols, ASymbolWhoseEndWrapsIsFound) {
  ElfImage image;
  image.functions = {{0xffff'ffff'ffff'ff00, 0x1000, "top"}};
  ASSERT_NE(image.Find(0xffff'ffff'ffff'ff00), nullptr);
  EXPECT_EQ(image.Find(0xffff'ffff'ffff'ffff)->name, "top");
}

}  // namespace
}  // namespace gpudoctor
