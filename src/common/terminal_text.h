// TerminalEscaper: what gpudoctor prints is made safe for a terminal here.
// Text from outside (a kernel log line, a process name any GPU user chooses,
// a label an agent exports, a server's error message) may hold escape
// sequences that clear the screen, move the cursor or fake an "OK" line, and
// bytes that are not UTF-8. They are written visibly instead: control
// characters, C1 controls and bidirectional overrides as \uXXXX (so JSON stays
// JSON and means the same), bytes that are not UTF-8 as \xNN. Newlines and
// tabs pass, and so do exactly the colour codes gpudoctor's own Style emits
// (bold, dim, red, green, yellow, magenta, reset): they can change a colour,
// never hide, move or erase text.
//
//   TerminalEscaper escaper;
//   std::string out;
//   escaper.Feed(piece, out);   // as many pieces as come; a sequence cut between two is kept
//   escaper.Finish(out);        // the end: anything held is written, escaped
//   std::string safe = EscapeForTerminal("name=py\x1b[2J");  // "name=py\\u001b[2J"
#pragma once

#include <string>
#include <string_view>

namespace gpudoctor {

class TerminalEscaper {
 public:
  void Feed(std::string_view bytes, std::string& out);
  void Finish(std::string& out);
  // Whether Feed would append `bytes` unchanged (printable ASCII, newlines and
  // tabs, nothing held): then they may be written as they are, without a copy.
  bool PassesUnchanged(std::string_view bytes) const;

 private:
  std::string held_;  // the start of a sequence the next piece may complete
};

std::string EscapeForTerminal(std::string_view text);

}  // namespace gpudoctor
