// The report formats nvidia-smi (and nvidia-debugdump) print, each read into a Snapshot.
//
// ParseNvidiaSmi decides which format the input is and calls one of these.
// Each parser adds what it finds to `snapshot` and returns how many readings
// it recognised, so the caller can tell "nothing of this format here" (0)
// from a report with missing or failed fields. Lines arrive without comment
// lines, pasted command lines, nvidia-smi's messages and blank lines.
// A parser fails only for input it cannot take (see each), or for more GPUs
// than kMaxGpus.
//
// Internal to the smi module.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/snapshot.h"

namespace gpudoctor::smi {

// No host has nearly this many GPUs: more means captures of several hosts
// pasted together, which one Snapshot cannot describe, or hostile input
// (each GpuSnapshot is a few KB; a 64 MiB capture could ask for millions).
inline constexpr size_t kMaxGpus = 1024;
Error TooManyGpus();

// `nvidia-smi -q -x`. A truncated document yields the elements before the
// cut and is noted incomplete.
Result<size_t> ParseXmlLog(std::string_view text, Snapshot& snapshot);

// `nvidia-smi -q`, whole or an excerpt. Readings before any "GPU <bus id>"
// header belong to one GPU with index 0. A whole report (its GPU blocks
// start with Product Name) whose last GPU has no Processes section was cut
// short, and is noted incomplete.
Result<size_t> ParseQueryText(std::span<const std::string_view> lines, Snapshot& snapshot);

// Whether `line` is a reading line ("Key : Value"), a "GPU <bus id>" header
// or the "NVSMI LOG" banner of `nvidia-smi -q`.
bool LooksLikeQueryText(std::string_view line);

// The default `nvidia-smi` table, with the process table when present. A
// table whose last line is not a whole border (+---+) was cut inside a box,
// and is noted incomplete; an excerpt of whole GPU blocks is not.
Result<size_t> ParseTable(std::span<const std::string_view> lines, Snapshot& snapshot);

// Whether `line` belongs to the box-drawn table ("|..." or "+---...").
bool LooksLikeTable(std::string_view line);

// What a pasted "nvidia-smi --query-gpu=... --format=csv,..." line says about
// the CSV printed below it.
struct CsvCommand {
  std::vector<std::string> columns;
  bool has_header = true;  // false for --format=csv,noheader
};
std::optional<CsvCommand> ParseCsvCommand(std::string_view command_line);

// Whether `line` is a --query-gpu CSV header naming at least one known column.
bool LooksLikeCsvHeader(std::string_view line);

// Whether every line has the same number (more than one) of comma-separated cells.
bool LooksLikeCsvRows(std::span<const std::string_view> lines);

// `--query-gpu=... --format=csv`. Takes the columns from the header line, or
// from `command` when there is none; fails when neither names them. A last
// row with fewer cells than columns was cut, and is noted incomplete.
//
// "Noted incomplete": a reason is added to snapshot.incomplete_reasons, which
// the rule capture_incomplete reports.
Result<size_t> ParseQueryCsv(std::span<const std::string_view> lines, const std::optional<CsvCommand>& command,
                             Snapshot& snapshot);

// The GPU lists of `nvidia-smi -L`, `nvidia-smi nvlink -s` and `nvlink -e`
// ("GPU 0: <name> (UUID: GPU-...)", then "Link N: 26.562 GB/s", "Link N:
// <inactive>" or "Link N: Replay Errors: 3" per link): each GPU's index, name
// and UUID, which of its links are active, and their error counters.
bool LooksLikeGpuList(std::string_view line);
Result<size_t> ParseGpuList(std::span<const std::string_view> lines, Snapshot& snapshot);

// `nvidia-smi topo -m`: the GPUs its matrix names, and a GPU whose NVLinks to
// its peers add up to fewer than another's as a reported nvlink_down.
bool LooksLikeTopology(std::string_view line);
Result<size_t> ParseTopology(std::span<const std::string_view> lines, Snapshot& snapshot);

// `nvidia-debugdump --list`: how many GPUs it found, each one's name, and the
// GPUs it could not open ("FAILED to get details on GPU (0x1): Unknown
// Error"), which become GPU access errors.
bool LooksLikeDebugDumpList(std::string_view line);
Result<size_t> ParseDebugDumpList(std::span<const std::string_view> lines, Snapshot& snapshot);

}  // namespace gpudoctor::smi
