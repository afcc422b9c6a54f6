#include "common/terminal_text.h"

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

TEST(EscapeForTerminal, PlainTextNewlinesTabsAndUtf8Pass) {
  EXPECT_EQ(EscapeForTerminal("GPU 3: 85 \xc2\xb0" "C\tok\n"), "GPU 3: 85 \xc2\xb0" "C\tok\n");
  const std::string accents_and_symbols = "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x94\xa5";
  EXPECT_EQ(EscapeForTerminal(accents_and_symbols), accents_and_symbols);
}

TEST(EscapeForTerminal, ControlSequencesFromOutsideAreShownNotObeyed) {
  EXPECT_EQ(EscapeForTerminal("name=py\x1b[2J\x1b[HOK\rthon"), "name=py\\u001b[2J\\u001b[HOK\\u000dthon");
  EXPECT_EQ(EscapeForTerminal("\x1b]0;title\x07"), "\\u001b]0;title\\u0007");
  EXPECT_EQ(EscapeForTerminal("hidden\x1b[8mtext"), "hidden\\u001b[8mtext") << "conceal is not a colour of ours";
  EXPECT_EQ(EscapeForTerminal("del\x7f"), "del\\u007f");
  EXPECT_EQ(EscapeForTerminal("c1 \xc2\x9b" "2J"), "c1 \\u009b2J") << "the 8-bit CSI";
  EXPECT_EQ(EscapeForTerminal("abc\xe2\x80\xae" "txt.exe"), "abc\\u202etxt.exe") << "a right-to-left override";
}

TEST(EscapeForTerminal, StylesOwnColoursPass) {
  const std::string red = "\x1b[1;31mCRITICAL\x1b[0m \x1b[1mxid\x1b[0m \x1b[2mdim\x1b[0m";
  EXPECT_EQ(EscapeForTerminal(red), red);
}

TEST(EscapeForTerminal, BytesThatAreNotUtf8AreShownAsBytes) {
  EXPECT_EQ(EscapeForTerminal("a\xff\xfe" "b"), "a\\xff\\xfeb");
  EXPECT_EQ(EscapeForTerminal("\xc0\xaf"), "\\xc0\\xaf") << "overlong";
  EXPECT_EQ(EscapeForTerminal("\xed\xa0\x80"), "\\xed\\xa0\\x80") << "a surrogate";
  EXPECT_EQ(EscapeForTerminal("\xe2\x9c"), "\\xe2\\x9c") << "cut short at the end";
  EXPECT_EQ(EscapeForTerminal("\xe2x"), "\\xe2x");
}

TEST(TerminalEscaper, ASequenceCutBetweenPiecesIsJudgedWhole) {
  const std::string text = "\x1b[1;31mred\x1b[0m \xe2\x9c\x93 \x1b[2Jx";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    TerminalEscaper escaper;
    std::string out;
    escaper.Feed(std::string_view(text).substr(0, cut), out);
    escaper.Feed(std::string_view(text).substr(cut), out);
    escaper.Finish(out);
    EXPECT_EQ(out, "\x1b[1;31mred\x1b[0m \xe2\x9c\x93 \\u001b[2Jx") << cut;
  }
  TerminalEscaper escaper;
  std::string out;
  escaper.Feed("end\x1b[1", out);
  EXPECT_EQ(out, "end");
  escaper.Finish(out);
  EXPECT_EQ(out, "end\\u001b[1");
}

// The guard writes a piece as it is when PassesUnchanged says so: only when Feed would give it back unchanged.
TEST(TerminalEscaper, PassesUnchangedOnlyWhatFeedWouldNotChange) {
  TerminalEscaper escaper;
  EXPECT_TRUE(escaper.PassesUnchanged(""));
  EXPECT_TRUE(escaper.PassesUnchanged("{\"kind\":\"xid\"}\n\tplain text of any length, 0123456789 ~\n"));
  for (std::string_view changed : {"a\x1b[2J", "\x1b[0m", "caf\xc3\xa9", "\r\n", "x\x7f", "\xff"}) {
    EXPECT_FALSE(escaper.PassesUnchanged(changed)) << changed;
  }
  for (int byte = 0; byte < 256; ++byte) {
    const std::string piece = "0123456789abcdef" + std::string(1, static_cast<char>(byte)) + "tail";
    TerminalEscaper fresh;
    std::string out;
    const bool unchanged = fresh.PassesUnchanged(piece);
    fresh.Feed(piece, out);
    fresh.Finish(out);
    if (unchanged) {
      EXPECT_EQ(out, piece) << byte;
    }
  }
  // A sequence held from the piece before: the next piece is not written as it is.
  std::string out;
  escaper.Feed("end\x1b[1", out);
  EXPECT_FALSE(escaper.PassesUnchanged("plain"));
}

}  // namespace
}  // namespace gpudoctor
