#include "common/embedded_bytes.h"

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <string>

namespace gpudoctor {
namespace {

// 1 MiB of read-only data in the test binary, as the catalogs are in gpudoctor.
constexpr size_t kSize = 1 << 20;
struct Blob {
  char bytes[kSize];
};
constexpr Blob MakeBlob() {
  Blob blob{};
  for (size_t i = 0; i < kSize; i += 64) blob.bytes[i] = static_cast<char>(i / 64 % 251 + 1);  // in .rodata, not .bss
  return blob;
}
constexpr Blob kBlob = MakeBlob();

long ResidentKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

uint64_t Sum() {
  uint64_t sum = 0;
  for (char byte : kBlob.bytes) sum += static_cast<unsigned char>(*static_cast<volatile const char*>(&byte));
  return sum;
}

TEST(EmbeddedBytes, ReleasedPagesLeaveTheResidentSizeAndReadBackUnchanged) {
  const uint64_t before = Sum();  // every page read in
  const long resident = ResidentKib();
  ReleaseEmbeddedPages(std::string_view(kBlob.bytes, kSize));
  EXPECT_LT(ResidentKib(), resident - 512);
  EXPECT_EQ(Sum(), before);
}

}  // namespace
}  // namespace gpudoctor
