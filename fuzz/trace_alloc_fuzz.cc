// What `gpudoctor trace-alloc` reads from outside itself: the shared ring the
// traced program writes (any bytes may be in a slot) and the ELF files it
// names for symbols. The first byte chooses: even, the rest is a run of
// 64-byte slots decoded and fed to the ledger, with intervals and the series
// of the verdict; odd, the rest is an ELF image. Nothing may crash, and the
// ledger's sums must hold.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "trace_alloc/allocation_ledger.h"
#include "trace_alloc/elf_symbols.h"
#include "trace_alloc/trace_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpudoctor;
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 1) {
    if (Result<ElfImage> image = ParseElfImage(rest)) {
      for (const ElfFunction& function : image->functions) {
        const ElfFunction* found = image->Find(function.start);
        if (found == nullptr || found->start != function.start) __builtin_trap();
        (void)Demangle(function.name);
      }
    }
    return 0;
  }
  AllocationLedger ledger;
  uint64_t now = 0;
  for (size_t offset = 0; offset + sizeof(trace_wire::Slot) <= rest.size(); offset += sizeof(trace_wire::Slot)) {
    trace_wire::Slot slot;
    std::memcpy(static_cast<void*>(&slot), rest.data() + offset, sizeof slot);
    if (std::optional<TraceRecord> record = DecodeSlot(slot)) {
      ledger.Add(*record);
      now = std::max(now, record->time_ns);
    }
    if (offset % (8 * sizeof(trace_wire::Slot)) == 0) (void)ledger.CloseInterval(now);
  }
  ledger.Finish(now);
  uint64_t by_kind = 0;
  for (const KindTotals& kind : ledger.kinds()) by_kind += kind.outstanding_bytes;
  if (by_kind != ledger.outstanding_bytes() || ledger.outstanding_bytes() > ledger.peak_bytes()) __builtin_trap();
  (void)ledger.series().Points(ledger.end_ns());
  return 0;
}
