// Gunzip for tests: the inverse of Gzip (common/gzip.h), for checking what
// was compressed. Production code never decompresses a whole buffer.
//
//   EXPECT_EQ(Gunzip(*Gzip(text)), text);
#pragma once

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <string_view>

namespace gpudoctor {

// Decompresses a gzip stream of at most `max_bytes` uncompressed bytes,
// failing the current test when it is not one.
inline std::string Gunzip(std::string_view packed, size_t max_bytes = 8 << 20) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);  // gzip only
  std::string out(max_bytes, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  stream.avail_in = static_cast<uInt>(packed.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(stream.total_out);
  inflateEnd(&stream);
  return out;
}

}  // namespace gpudoctor
