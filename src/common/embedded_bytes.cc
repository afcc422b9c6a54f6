#include "common/embedded_bytes.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace gpudoctor {

void ReleaseEmbeddedPages(std::string_view bytes) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  // Only the pages wholly inside `bytes`: their neighbours may be in use.
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(bytes.data()) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size()) & ~(page - 1);
  // Read-only pages of the binary's file mapping: dropped, never lost.
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace gpudoctor
