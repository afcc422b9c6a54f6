// How nvidia-smi spells a single reading, turned into a model Field.
//
// nvidia-smi prints every reading as text: a number with a unit ("56 C",
// "228.82 W", "4MiB", "16x"), a word ("Enabled", "Not Active"), or a marker
// saying there is no reading: "N/A" and "[Not Supported]" mean not supported,
// while "ERR!" and "[Unknown Error]" mean the read failed. These helpers keep
// that distinction, so a failed read never turns into a 0.
//
//   NumberField<uint32_t>("56 C")   -> Value(56)
//   NumberField<uint32_t>("ERR!")   -> Failed("ERR!")
//   MebibytesField("4MiB")          -> Value(4194304)
//   FlagField("[N/A]")              -> NotSupported
//
// Internal to the smi module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "model/field.h"

namespace gpudoctor::smi {

enum class ValueKind { kReading, kNotSupported, kFailed };

// Whether `text` is a reading or one of nvidia-smi's markers for "none".
ValueKind ClassifyValue(std::string_view text);

Field<std::string> TextField(std::string_view text);

// A number followed by an optional unit nvidia-smi uses (%, C, W, MHz, MiB,
// x, KB/s, ...). Defined for uint32_t, uint64_t and double.
template <typename Number>
Field<Number> NumberField(std::string_view text);

// Memory in bytes; nvidia-smi reports MiB, with or without the unit.
Field<uint64_t> MebibytesField(std::string_view text);

// nvidia-smi prints one fan speed ("30 %"); the model keeps one per fan.
Field<std::vector<uint32_t>> FanSpeedField(std::string_view text);

// Yes/No, Enabled/Disabled, On/Off, Active/Not Active.
Field<bool> FlagField(std::string_view text);

// A bus id in the canonical "0000:bb:dd.f" form.
Field<std::string> PciBusIdField(std::string_view text);

// A hexadecimal bit mask such as "0x0000000000000004".
Field<uint64_t> HexMaskField(std::string_view text);

// "12.4" -> 12040, the encoding NVML uses for CUDA driver versions.
std::optional<int32_t> ParseCudaVersion(std::string_view text);

// nvidia-smi's timestamps: "Sat May  8 13:25:04 2021" (headers) and
// "2024/03/12 10:15:42.123" (CSV). nvidia-smi prints local time without a
// zone, so the time is read as UTC.
std::optional<WallTime> ParseSmiTimestamp(std::string_view text);

}  // namespace gpudoctor::smi
