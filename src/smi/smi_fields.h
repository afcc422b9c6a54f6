// Where each named nvidia-smi reading lands in the GPU model.
//
// Three of nvidia-smi's formats name their readings, each in its own way:
// `-q` text by its section path, `-q -x` XML by its element path and
// `--query-gpu` CSV by its column name. One table per naming maps those names
// to a GpuSnapshot field; the tables are the place to add a reading.
//
//   ApplyGpuReading(ReadingNaming::kQueryText, "temperature/gpu current temp", "56 C", gpu);
//   ApplyGpuReading(ReadingNaming::kXml, "temperature/gpu_temp", "56 C", gpu);
//   ApplyGpuReading(ReadingNaming::kCsv, "temperature.gpu", "56", gpu);
//
// Names are lower case; path parts are joined with '/'. Paths are relative to
// the GPU (`GPU 0000:..` header or <gpu> element).
//
// Internal to the smi module.
#pragma once

#include <string_view>

#include "model/snapshot.h"

namespace gpudoctor::smi {

enum class ReadingNaming { kQueryText, kXml, kCsv };

// Stores the reading in `gpu`. Returns false, leaving `gpu` alone, when the
// name is not one the model has a field for.
bool ApplyGpuReading(ReadingNaming naming, std::string_view name, std::string_view value, GpuSnapshot& gpu);

// Whether ApplyGpuReading would store a reading of that name.
bool IsKnownGpuReading(ReadingNaming naming, std::string_view name);

}  // namespace gpudoctor::smi
