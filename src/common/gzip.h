// Gzip: a whole buffer compressed in memory into the gzip format (RFC 1952),
// for support bundles and HTTP responses.
//
//   Result<std::string> packed = Gzip(text);                      // default level
//   Result<std::string> smallest = Gzip(text, GzipLevel::kSmallest);
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace gpudoctor {

enum class GzipLevel {
  kDefault,   // zlib's balance of speed and size (level 6)
  kSmallest,  // the smallest output, several times slower (level 9)
};

Result<std::string> Gzip(std::string_view data, GzipLevel level = GzipLevel::kDefault);

}  // namespace gpudoctor
