#include "common/byte_runs.h"

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace gpudoctor {
namespace {

bool Printable(unsigned char c) { return (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t'; }
bool JsonPlain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

size_t SlowEnd(std::string_view text, size_t from, bool (*plain)(unsigned char)) {
  while (from < text.size() && plain(static_cast<unsigned char>(text[from]))) ++from;
  return from;
}

// Each byte value at each offset of a word, inside plain text of every length around a word.
TEST(EndOfRun, StopsWhereTheByteLoopStopsForEveryByteAtEveryOffset) {
  for (int length = 0; length <= 26; ++length) {
    for (int at = 0; at < length; ++at) {
      for (int value = 0; value < 256; ++value) {
        std::string text(static_cast<size_t>(length), 'a');
        text[static_cast<size_t>(at)] = static_cast<char>(value);
        for (size_t from : {size_t{0}, size_t{1}, size_t{3}}) {
          if (from > text.size()) continue;
          ASSERT_EQ(EndOfRun(text, from, Printable, ByteRunWord::kPrintable), SlowEnd(text, from, Printable))
              << length << " " << at << " " << value;
          ASSERT_EQ(EndOfRun(text, from, JsonPlain, ByteRunWord::kJsonStringPlain), SlowEnd(text, from, JsonPlain))
              << length << " " << at << " " << value;
        }
      }
    }
  }
}

TEST(EndOfRun, StopsWhereTheByteLoopStopsOnRandomText) {
  std::mt19937 random(7);
  for (int round = 0; round < 20000; ++round) {
    std::string text(random() % 64, ' ');
    // Mostly printable, with a few bytes of every other kind, so that runs are long and stops varied.
    for (char& c : text) c = static_cast<char>(random() % 16 == 0 ? random() % 256 : 0x20 + random() % 0x5f);
    const size_t from = text.empty() ? 0 : random() % text.size();
    ASSERT_EQ(EndOfRun(text, from, Printable, ByteRunWord::kPrintable), SlowEnd(text, from, Printable));
    ASSERT_EQ(EndOfRun(text, from, JsonPlain, ByteRunWord::kJsonStringPlain), SlowEnd(text, from, JsonPlain));
  }
}

}  // namespace
}  // namespace gpudoctor
