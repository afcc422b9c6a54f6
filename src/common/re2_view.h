// RE2 takes text as its own StringPiece, which Debian 12's RE2 cannot make
// from a std::string_view; Piece makes one.
//
//   RE2::FullMatch(Piece(Trim(line)), pattern, &value);
#pragma once

#include <re2/stringpiece.h>

#include <string_view>

namespace gpudoctor {

inline re2::StringPiece Piece(std::string_view text) { return {text.data(), text.size()}; }

}  // namespace gpudoctor
