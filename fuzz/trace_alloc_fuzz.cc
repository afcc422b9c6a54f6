// What `gpudoctor trace-alloc` reads from outside itself: the shared ring the
// traced program writes (any bytes may be anywhere in it) and the ELF files it
// names for symbols. The first byte chooses: odd, the rest is an ELF image;
// 2 modulo 4, the rest is written over a whole ring (header and slots), in
// rounds, between the reader's drains, as a running program could; 0 modulo
// 4, the rest is a run of 64-byte slots decoded and fed to the ledger, with
// intervals and the series of the verdict. Nothing may crash or hang, every
// read must end, and the ledger's sums must hold.
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <algorithm>

#include "trace_alloc/allocation_ledger.h"
#include "trace_alloc/elf_symbols.h"
#include "trace_alloc/trace_records.h"
#include "trace_alloc/trace_ring.h"

namespace {

// A small ring whose every byte the input writes, a piece before each read.
void FuzzRingReader(std::string_view input) {
  using namespace gpudoctor;
  constexpr uint64_t kCapacity = 16;
  auto created = TraceRing::Create(kCapacity, /*max_waiting_writers=*/64);
  if (!created) __builtin_trap();
  std::unique_ptr<TraceRing> ring = std::move(*created);
  const size_t bytes = trace_wire::RingBytes(kCapacity);
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring->fd(), 0);
  if (memory == MAP_FAILED) __builtin_trap();
  char* program = static_cast<char*>(memory);
  AllocationLedger ledger;
  auto add = [&ledger](const TraceRecord& record) { ledger.Add(record); };
  // Each round: an offset (2 bytes), a length (1 byte), that many bytes written there, then a drain.
  while (input.size() >= 3) {
    const size_t offset = (static_cast<uint8_t>(input[0]) | static_cast<uint8_t>(input[1]) << 8) % bytes;
    const size_t length = std::min<size_t>({static_cast<uint8_t>(input[2]), input.size() - 3, bytes - offset});
    std::memcpy(program + offset, input.data() + 3, length);
    input.remove_prefix(3 + length);
    const size_t taken = ring->Drain(add, 1 << 10);
    if (taken > kCapacity) __builtin_trap();  // nothing beyond the ring can be read in one pass
  }
  const uint64_t start = MonotonicNowNs();
  ring->DrainRemaining(add, 0);
  if (MonotonicNowNs() - start > 2'000'000'000) __builtin_trap();  // every read ends
  if (auto counters = ring->counters(); counters && ring->corrupt()) __builtin_trap();
  munmap(memory, bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpudoctor;
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 4 == 2) {
    FuzzRingReader(rest);
    return 0;
  }
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
