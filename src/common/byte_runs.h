// Finding the end of a run of plain bytes eight at a time, for the writers
// that copy such runs whole and treat only the bytes after them (the JSON
// string writer, the terminal guard). Nearly everything they write is
// printable ASCII, so a word of eight plain bytes is skipped with a few
// arithmetic operations instead of eight compares.
//
//   size_t end = EndOfRun(text, start, [](unsigned char c) { return c >= 0x20 && c < 0x7f; },
//                         ByteRunWord::kPrintable);
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace gpudoctor {

// The bytes for which a word of eight is not skipped whole; the caller's own
// test then decides byte by byte, and may take some of them (the terminal
// guard copies '\n' and '\t').
enum class ByteRunWord {
  kPrintable,        // stops at controls (below 0x20), DEL and everything from 0x80
  kJsonStringPlain,  // stops at controls, '"', '\\' and everything from 0x80
};

namespace byte_runs_detail {

constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kHighs = 0x8080808080808080ULL;

// Nonzero when some byte of `word` is below `n` (n <= 128) or has its high bit set.
constexpr uint64_t BelowOrHigh(uint64_t word, uint64_t n) { return ((word - kOnes * n) | word) & kHighs; }
// Nonzero when some byte of `word` equals `c`.
constexpr uint64_t HasByte(uint64_t word, unsigned char c) {
  const uint64_t x = word ^ (kOnes * c);
  return (x - kOnes) & ~x & kHighs;
}

inline bool WordMayStop(uint64_t word, ByteRunWord kind) {
  switch (kind) {
    case ByteRunWord::kPrintable:  // 0x7f plus one is 0x80: DEL shows as a high bit
      return (BelowOrHigh(word, 0x20) | ((word + kOnes) & kHighs)) != 0;
    case ByteRunWord::kJsonStringPlain:
      return (BelowOrHigh(word, 0x20) | HasByte(word, '"') | HasByte(word, '\\')) != 0;
  }
  return true;
}

}  // namespace byte_runs_detail

// The offset of the first byte at or after `from` for which `plain` is false
// (text.size() if none). `plain` must be true for every byte `kind` does not
// stop at.
template <typename Plain>
size_t EndOfRun(std::string_view text, size_t from, Plain plain, ByteRunWord kind) {
  size_t i = from;
  for (;;) {
    while (i + 8 <= text.size()) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, sizeof word);
      if (byte_runs_detail::WordMayStop(word, kind)) break;
      i += 8;
    }
    // The word that may stop, or the tail: byte by byte.
    const size_t end = std::min(text.size(), i + 8);
    for (; i < end; ++i) {
      if (!plain(static_cast<unsigned char>(text[i]))) return i;
    }
    if (i == text.size()) return i;
  }
}

}  // namespace gpudoctor
