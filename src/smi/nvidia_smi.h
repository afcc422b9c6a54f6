// Captured nvidia-smi output, read into a Snapshot.
//
// Operators paste what nvidia-smi printed on a sick machine into a ticket;
// this module turns it into the same Snapshot live NVML collection produces,
// so the health rules can judge it offline. The format is recognised from
// the content:
//   - `nvidia-smi -q -x` XML (a truncated document yields what it holds),
//   - `nvidia-smi -q` text, whole or an excerpt (`-d TEMPERATURE`, a lone
//     "Remapped Rows" section: readings without a GPU header go to GPU 0),
//   - the default `nvidia-smi` table, with its process table when present,
//   - `--query-gpu=... --format=csv`, with a header, or without one when the
//     pasted "$ nvidia-smi --query-gpu=..." command line names the columns,
//   - `nvidia-smi -L`, `nvidia-smi nvlink -s` (which links are inactive, or
//     "all links are inactive") and `nvlink -e` (each link's error counters),
//   - `nvidia-smi topo -m` (a GPU with fewer NVLinks to its peers than the others),
//   - `nvidia-debugdump --list`, with the GPUs it failed to open,
//   - nvidia-smi's failure messages ("Failed to initialize NVML: ...",
//     "Unable to determine the device handle for GPU ...", "No devices were
//     found"), which become driver or GPU access errors, not parse errors,
//     and its warnings ("WARNING: infoROM is corrupted at gpu ...").
// A table row that does not read (a lost '|') keeps its GPU, with the
// readings it would have given failed, and notes the capture incomplete.
// Lines starting with '#' and pasted command lines are skipped, and so are the
// escape sequences of a colour terminal (topo -m underlines its header). A reading
// printed as "ERR!" or "[Unknown Error]" becomes a failed Field, "N/A" or
// "[Not Supported]" a not-supported one.
//
//   Result<Snapshot> snapshot = ParseNvidiaSmi(text, "node7.txt");
//   if (!snapshot) return Fail(snapshot.error().message);  // "not recognised as nvidia-smi output: ..."
//   snapshot->source;                                      // "nvidia-smi:node7.txt"
//   snapshot->driver_error;                                // kVersionMismatch, ...
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "model/snapshot.h"

namespace gpudoctor {

// How ParseNvidiaSmi's error starts when nothing in the text is nvidia-smi's; its other errors are about output
// it did recognise (CSV rows whose columns nothing names, too many GPUs).
inline constexpr std::string_view kNotNvidiaSmiOutput = "not recognised as nvidia-smi output: ";

// Largest file ReadNvidiaSmiFile accepts; real captures are far smaller.
inline constexpr uint64_t kMaxNvidiaSmiFileBytes = 64ull << 20;

// Reads nvidia-smi output. Pure: no I/O, no clock (taken_at is the
// capture's own timestamp when it has one, else the epoch). Fails only when
// nothing in `text` is recognised as nvidia-smi's (empty input, binary data,
// another program's output), for CSV rows whose columns nothing names, and
// for more than 1024 GPUs (several hosts' captures in one text).
// `source_name` names the capture in snapshot.source.
Result<Snapshot> ParseNvidiaSmi(std::string_view text, std::string_view source_name);

// Reads the file at `path` under the input rule (common/input_file.h) and
// parses it with `path` as the source name. Errors start with the path:
// missing, unreadable, not a regular file, over kMaxNvidiaSmiFileBytes.
Result<Snapshot> ReadNvidiaSmiFile(const std::string& path);

}  // namespace gpudoctor
