#include "common/terminal_text.h"

#include <array>
#include <cstdint>
#include <cstdio>

#include "common/byte_runs.h"

namespace gpudoctor {
namespace {

// The colour codes Style (cli/terminal.cc) writes; nothing else passes.
constexpr std::array<std::string_view, 8> kAllowedSequences = {
    "\x1b[0m", "\x1b[1m", "\x1b[2m", "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[35m", "\x1b[1;31m"};

void AppendCodePoint(uint32_t code_point, std::string& out) {
  char text[16];
  std::snprintf(text, sizeof text, "\\u%04x", code_point);
  out += text;
}

void AppendByte(unsigned char byte, std::string& out) {
  char text[8];
  std::snprintf(text, sizeof text, "\\x%02x", byte);
  out += text;
}

bool Dangerous(uint32_t code_point) {
  return code_point < 0x20 || (code_point >= 0x7f && code_point <= 0x9f) ||      // C0, DEL, C1
         code_point == 0x200e || code_point == 0x200f ||                         // left-to-right, right-to-left marks
         (code_point >= 0x202a && code_point <= 0x202e) ||                       // embeddings and overrides
         (code_point >= 0x2066 && code_point <= 0x2069);                         // isolates
}

// How an allowed sequence relates to the bytes at hand.
enum class Match { kNone, kWhole, kPrefix };
Match MatchAllowed(std::string_view bytes, size_t& length) {
  bool prefix = false;
  for (std::string_view allowed : kAllowedSequences) {
    if (bytes.substr(0, allowed.size()) == allowed) {
      length = allowed.size();
      return Match::kWhole;
    }
    if (bytes.size() < allowed.size() && allowed.substr(0, bytes.size()) == bytes) prefix = true;
  }
  return prefix ? Match::kPrefix : Match::kNone;
}

// The length of the UTF-8 sequence `lead` starts, or 0 when it starts none.
size_t SequenceLength(unsigned char lead) {
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

// Escapes `bytes` into `out`; returns how many it consumed. With `more`
// set, an unfinished sequence at the end is left for the next piece.
bool Plain(unsigned char c) { return (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t'; }

size_t Escape(std::string_view bytes, std::string& out, bool more) {
  auto plain = [](unsigned char c) { return Plain(c); };
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (plain(c)) {  // a run of printable ASCII is copied whole: nearly all of what is printed
      const size_t run = i;
      i = EndOfRun(bytes, i, plain, ByteRunWord::kPrintable);
      out.append(bytes.data() + run, i - run);
      continue;
    }
    if (c == 0x1b) {
      size_t length = 0;
      const Match match = MatchAllowed(bytes.substr(i), length);
      if (match == Match::kWhole) {
        out.append(bytes.substr(i, length));
        i += length;
        continue;
      }
      if (match == Match::kPrefix && more) return i;
    }
    if (c < 0x80) {
      AppendCodePoint(c, out);
      ++i;
      continue;
    }
    const size_t length = SequenceLength(c);
    if (length == 0) {
      AppendByte(c, out);
      ++i;
      continue;
    }
    size_t present = 1;
    while (present < length && i + present < bytes.size() &&
           (static_cast<unsigned char>(bytes[i + present]) & 0xc0) == 0x80)
      ++present;
    if (present < length) {
      if (i + present == bytes.size() && more) return i;  // the rest may come
      AppendByte(c, out);
      ++i;
      continue;
    }
    uint32_t code_point = c & (0xff >> (length + 1));
    for (size_t k = 1; k < length; ++k) code_point = (code_point << 6) | (bytes[i + k] & 0x3f);
    const bool overlong = (length == 3 && code_point < 0x800) || (length == 4 && code_point < 0x10000);
    if (overlong || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff)) {
      AppendByte(c, out);
      ++i;
      continue;
    }
    if (Dangerous(code_point)) AppendCodePoint(code_point, out);
    else out.append(bytes.substr(i, length));
    i += length;
  }
  return i;
}

}  // namespace

void TerminalEscaper::Feed(std::string_view bytes, std::string& out) {
  if (held_.empty()) {
    const size_t consumed = Escape(bytes, out, /*more=*/true);
    held_.assign(bytes.substr(consumed));
    return;
  }
  held_.append(bytes);
  const size_t consumed = Escape(held_, out, /*more=*/true);
  held_.erase(0, consumed);
}

bool TerminalEscaper::PassesUnchanged(std::string_view bytes) const {
  return held_.empty() &&
         EndOfRun(bytes, 0, [](unsigned char c) { return Plain(c); }, ByteRunWord::kPrintable) == bytes.size();
}

void TerminalEscaper::Finish(std::string& out) {
  Escape(held_, out, /*more=*/false);
  held_.clear();
}

std::string EscapeForTerminal(std::string_view text) {
  std::string out;
  TerminalEscaper escaper;
  escaper.Feed(text, out);
  escaper.Finish(out);
  return out;
}

}  // namespace gpudoctor
