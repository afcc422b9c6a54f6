// TraceRecord: one record of the preloaded library, copied out of the shared
// ring (trace_wire.h) and checked. The ring is written by the traced program,
// so a slot may hold anything: DecodeSlot refuses what is not a record.
//
//   std::optional<TraceRecord> record = DecodeSlot(copied_slot);
//   if (record) ledger.Add(*record);
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trace_alloc/trace_wire.h"

namespace gpudoctor {

struct TraceRecord {
  trace_wire::RecordType type = trace_wire::RecordType::kEmpty;
  trace_wire::Api api = trace_wire::Api::kNone;
  trace_wire::Kind kind = trace_wire::Kind::kNone;  // kAlloc only
  uint16_t index = 0;                                // kFrame: frame number; kText: piece number
  uint32_t pid = 0;
  uint64_t time_ns = 0;
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint32_t site = 0;
  int32_t result = 0;
  uint64_t extra = 0;
  // kText only.
  trace_wire::TextOwner text_owner = trace_wire::TextOwner::kModulePath;
  uint32_t text_id = 0;
  std::string text;
};

// The record in a slot the reader has copied, or nullopt when it is none.
std::optional<TraceRecord> DecodeSlot(const trace_wire::Slot& slot);

}  // namespace gpudoctor
