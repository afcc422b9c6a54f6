#include "trace_alloc/trace_records.h"

namespace gpudoctor {

using namespace trace_wire;

std::optional<TraceRecord> DecodeSlot(const Slot& slot) {
  TraceRecord record;
  if (slot.type < static_cast<uint8_t>(RecordType::kAttach) || slot.type > static_cast<uint8_t>(RecordType::kDetach))
    return std::nullopt;
  record.type = static_cast<RecordType>(slot.type);
  record.pid = slot.pid;
  if (record.type == RecordType::kText) {
    if (slot.piece.length > kTextBytes || slot.piece.owner > static_cast<uint8_t>(TextOwner::kExecutable))
      return std::nullopt;
    record.index = slot.aux;
    record.text_owner = static_cast<TextOwner>(slot.piece.owner);
    record.text_id = slot.piece.id;
    record.text.assign(slot.piece.text, slot.piece.length);
    return record;
  }
  if (slot.api >= static_cast<uint8_t>(Api::kCount)) return std::nullopt;
  record.api = static_cast<Api>(slot.api);
  record.index = slot.aux;
  record.time_ns = slot.event.time_ns;
  record.address = slot.event.address;
  record.bytes = slot.event.bytes;
  record.site = slot.event.site;
  record.result = slot.event.result;
  record.extra = slot.event.extra;
  if (record.type == RecordType::kAlloc) {
    if (slot.aux == 0 || slot.aux >= static_cast<uint16_t>(kKindCount)) return std::nullopt;
    record.kind = static_cast<Kind>(slot.aux);
    record.index = 0;
  }
  if (record.type == RecordType::kFrame && slot.aux >= kMaxFrames) return std::nullopt;
  if (record.type == RecordType::kSite && slot.event.bytes > kMaxFrames) return std::nullopt;
  return record;
}

}  // namespace gpudoctor
