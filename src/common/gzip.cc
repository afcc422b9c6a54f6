#include "common/gzip.h"

#include <zlib.h>

#include <limits>

namespace gpudoctor {

Result<std::string> Gzip(std::string_view data, GzipLevel level) {
  if (data.size() > std::numeric_limits<uInt>::max()) return Error{"zlib: input too large"};
  z_stream stream{};
  const int zlib_level = level == GzipLevel::kSmallest ? Z_BEST_COMPRESSION : Z_DEFAULT_COMPRESSION;
  // 15 + 16: the largest window, with a gzip header and trailer instead of zlib's.
  if (deflateInit2(&stream, zlib_level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Error{"zlib: cannot start compression"};
  }
  std::string out(deflateBound(&stream, static_cast<uLong>(data.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&stream, Z_FINISH);  // the bound makes one call enough
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) return Error{"zlib: compression failed"};
  return out;
}

}  // namespace gpudoctor
